package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/shardplan/shardplan/api"
	"github.com/shardplan/shardplan/internal/cache"
)

// config is everything the service reads at start: defaults, overridden by environment
// variables, overridden by flags. Validate checks it in one place.
type config struct {
	Addr               string
	RedisURL           string
	LogLevel           string
	LogFormat          string
	MaxBodyBytes       int64
	MaxDevices         int
	MaxRank            int
	MaxMeshAxes        int
	ListDeviceLimit    int
	RequestTimeout     time.Duration
	ShutdownTimeout    time.Duration
	DrainDelay         time.Duration
	MaxInflight        int
	MaxCompute         int
	BodyReadTimeout    time.Duration
	RateLimit          float64
	RateBurst          int
	MaxResponse        int64
	MaxAnswer          int64
	MaxGraphDepth      int
	MaxGraphBytes      int64
	MaxGraphOps        int
	MaxGraphTensors    int
	MaxModuleDepth     int
	MaxJSONDepth       int
	MaxElements        int64
	MaxTransferTensors int
	MaxTransferMoves   int
	CacheTTL           time.Duration
	CacheMaxBytes      int64
	// Garbage collector (gc.go): applied at start unless GOGC / GOMEMLIMIT are set.
	GCPercent   int
	MemoryLimit int64 // bytes; 0: autoMemoryLimit
	// Plan cache (internal/cache) beyond REDIS_URL, TTL and size; see cacheConfig.
	RedisAddrs        string // comma-separated host:port seeds
	RedisMasterName   string
	RedisCluster      bool
	RedisUsername     string
	RedisPassword     string
	RedisDialTimeout  time.Duration
	RedisReadTimeout  time.Duration
	RedisWriteTimeout time.Duration
	CacheTimeout      time.Duration
	CachePrefix       string
	// Access control and transport (off by default); see accessConfig.
	APIKeys     string // comma-separated; never logged
	APIKeysFile string // one key per line
	TLSCert     string
	TLSKey      string
	MetricsAddr string
	CORSOrigins string // comma-separated
}

func defaultConfig() config {
	l := api.DefaultLimits()
	return config{
		Addr:               ":8080",
		LogLevel:           "info",
		LogFormat:          "text",
		MaxBodyBytes:       l.MaxBodyBytes,
		MaxDevices:         l.MaxDevices,
		MaxRank:            l.MaxRank,
		MaxMeshAxes:        l.MaxMeshAxes,
		ListDeviceLimit:    l.ListDeviceLimit,
		RequestTimeout:     l.RequestTimeout,
		ShutdownTimeout:    15 * time.Second,
		MaxInflight:        l.MaxInflight,
		MaxCompute:         l.MaxCompute,
		BodyReadTimeout:    l.BodyReadTimeout,
		RateBurst:          l.RateBurst,
		MaxResponse:        l.MaxResponseBytes,
		MaxAnswer:          l.MaxAnswerBytes,
		MaxGraphDepth:      l.MaxGraphDepth,
		MaxGraphBytes:      l.MaxGraphBodyBytes,
		MaxGraphOps:        l.MaxGraphOps,
		MaxGraphTensors:    l.MaxGraphTensors,
		MaxModuleDepth:     l.MaxModuleDepth,
		MaxJSONDepth:       l.MaxJSONDepth,
		MaxElements:        l.MaxElements,
		MaxTransferTensors: l.MaxTransferTensors,
		MaxTransferMoves:   l.MaxTransferMoves,
		CacheTTL:           time.Hour,
		CacheMaxBytes:      64 << 20,
		GCPercent:          defaultGCPercent,

		RedisDialTimeout:  cache.DefaultDialTimeout,
		RedisReadTimeout:  cache.DefaultReadTimeout,
		RedisWriteTimeout: cache.DefaultWriteTimeout,
		CacheTimeout:      cache.DefaultTimeout,
		CachePrefix:       cache.DefaultPrefix,
	}
}

// setting is one configuration value: its env name, flag name, usage and where it lives.
type setting struct {
	env, flag, usage string
	ptr              any // *string, *int, *int64, *float64, *time.Duration, *bool
}

func (c *config) settings() []setting {
	return []setting{
		{"SHARDPLAN_ADDR", "addr", "listen address (host:port; port 0 picks a free one)", &c.Addr},
		{"REDIS_URL", "redis-url", "Redis URL for the plan cache (redis://, rediss://, unix://); empty: in-process cache", &c.RedisURL},
		{"SHARDPLAN_LOG_LEVEL", "log-level", "log level: debug, info, warn, error", &c.LogLevel},
		{"SHARDPLAN_LOG_FORMAT", "log-format", "log format: json or text", &c.LogFormat},
		{"SHARDPLAN_MAX_BODY_BYTES", "max-body-bytes", "largest request body in bytes (413 above)", &c.MaxBodyBytes},
		{"SHARDPLAN_MAX_DEVICES", "max-devices", "largest mesh, in devices", &c.MaxDevices},
		{"SHARDPLAN_MAX_RANK", "max-rank", "largest tensor rank", &c.MaxRank},
		{"SHARDPLAN_MAX_MESH_AXES", "max-mesh-axes", "most mesh axes", &c.MaxMeshAxes},
		{"SHARDPLAN_LIST_DEVICE_LIMIT", "list-device-limit", "above this many devices, per-device lists are left out of responses unless asked for", &c.ListDeviceLimit},
		{"SHARDPLAN_REQUEST_TIMEOUT", "request-timeout", "deadline of one request (503 timeout after it)", &c.RequestTimeout},
		{"SHARDPLAN_SHUTDOWN_TIMEOUT", "shutdown-timeout", "how long a graceful shutdown waits for in-flight requests", &c.ShutdownTimeout},
		{"SHARDPLAN_DRAIN_DELAY", "drain-delay", "on SIGTERM, how long /readyz answers 503 before the listener closes (let load balancers notice)", &c.DrainDelay},
		{"SHARDPLAN_MAX_INFLIGHT", "max-inflight", "most concurrent /v1 requests (503 overloaded above)", &c.MaxInflight},
		{"SHARDPLAN_MAX_COMPUTE", "max-compute", "how many requests compute at once (default GOMAXPROCS); the others wait within their deadline, cached answers never wait", &c.MaxCompute},
		{"SHARDPLAN_BODY_READ_TIMEOUT", "body-read-timeout", "deadline for reading a request body, before any slot is taken (408 after)", &c.BodyReadTimeout},
		{"SHARDPLAN_RATE_LIMIT", "rate-limit", "per-client /v1 requests per second (0: off; a client is its API key, else its address); over it, 429 with Retry-After", &c.RateLimit},
		{"SHARDPLAN_RATE_BURST", "rate-burst", "per-client burst of the rate limit", &c.RateBurst},
		{"SHARDPLAN_MAX_RESPONSE_BYTES", "max-response-bytes", "largest estimated size of the per-device lists (transfers, pairs, tiles) of one answer, in bytes (422 response-too-large above, before they are built)", &c.MaxResponse},
		{"SHARDPLAN_MAX_ANSWER_BYTES", "max-answer-bytes", "largest encoded answer of any /v1 route, in bytes (422 response-too-large above, naming the include entry or field that shrinks it)", &c.MaxAnswer},
		{"SHARDPLAN_MAX_GRAPH_DEPTH", "max-graph-depth", "how deep while ops may nest in a graph (400 above)", &c.MaxGraphDepth},
		{"SHARDPLAN_MAX_GRAPH_BODY_BYTES", "max-graph-body-bytes", "largest POST /v1/graph body in bytes (413 above)", &c.MaxGraphBytes},
		{"SHARDPLAN_MAX_GRAPH_OPS", "max-graph-ops", "most ops in a graph, while regions included", &c.MaxGraphOps},
		{"SHARDPLAN_MAX_GRAPH_TENSORS", "max-graph-tensors", "most tensors in a graph", &c.MaxGraphTensors},
		{"SHARDPLAN_MAX_MODULE_DEPTH", "max-module-depth", "deepest nesting of a StableHLO module on /v1/graph (regions, attribute brackets, inlined calls)", &c.MaxModuleDepth},
		{"SHARDPLAN_MAX_JSON_DEPTH", "max-json-depth", "deepest nesting of arrays and objects in a JSON request body (400 above, checked before decoding)", &c.MaxJSONDepth},
		{"SHARDPLAN_MAX_ELEMENTS", "max-elements", "most elements of any one tensor, on every path (400 above; at most 2^55)", &c.MaxElements},
		{"SHARDPLAN_MAX_TRANSFER_TENSORS", "max-transfer-tensors", "most tensors one POST /v1/transfer request stands for, repeats counted (400 limit-exceeded above, checked before any name is made)", &c.MaxTransferTensors},
		{"SHARDPLAN_MAX_TRANSFER_MOVES", "max-transfer-moves", "most moves a POST /v1/transfer plan makes for one tensor of every group under every strategy (400 limit-exceeded above)", &c.MaxTransferMoves},
		{"SHARDPLAN_CACHE_TTL", "cache-ttl", "how long a memoized plan is kept", &c.CacheTTL},
		{"SHARDPLAN_CACHE_MAX_BYTES", "cache-max-bytes", "size of the in-process plan cache in bytes (with Redis: the near cache in front of it)", &c.CacheMaxBytes},
		{"SHARDPLAN_CACHE_TIMEOUT", "cache-timeout", "deadline of one cache call (a slower Redis is a miss)", &c.CacheTimeout},
		{"SHARDPLAN_CACHE_PREFIX", "cache-prefix", "prefix of every plan cache key", &c.CachePrefix},
		{"SHARDPLAN_GC_PERCENT", "gc-percent", "garbage collector target percentage (as GOGC; GOGC, when set, wins)", &c.GCPercent},
		{"SHARDPLAN_MEMORY_LIMIT", "memory-limit", "soft limit of the Go heap in bytes, so a large gc-percent cannot grow the heap past it (as GOMEMLIMIT, which wins when set; 0: the larger of 512 MiB and 4 x cache-max-bytes)", &c.MemoryLimit},
		{"SHARDPLAN_API_KEYS", "api-keys", "comma-separated API keys; set, /v1 needs one as Authorization: Bearer <key> or X-API-Key (never logged)", &c.APIKeys},
		{"SHARDPLAN_API_KEYS_FILE", "api-keys-file", "file of API keys, one per line (# comments), added to SHARDPLAN_API_KEYS; read at start", &c.APIKeysFile},
		{"SHARDPLAN_TLS_CERT", "tls-cert", "PEM certificate (chain) file; with SHARDPLAN_TLS_KEY, serve HTTPS", &c.TLSCert},
		{"SHARDPLAN_TLS_KEY", "tls-key", "PEM private key file of SHARDPLAN_TLS_CERT", &c.TLSKey},
		{"SHARDPLAN_METRICS_ADDR", "metrics-addr", "separate listen address for /metrics and /debug/pprof (empty: /metrics on the API address, no pprof)", &c.MetricsAddr},
		{"SHARDPLAN_CORS_ORIGINS", "cors-origins", "comma-separated origins allowed to call the API from a browser (* for any; empty: none)", &c.CORSOrigins},
		{"SHARDPLAN_REDIS_ADDRS", "redis-addrs", "comma-separated Redis host:port seeds (Cluster nodes or Sentinels), added to REDIS_URL's", &c.RedisAddrs},
		{"SHARDPLAN_REDIS_MASTER_NAME", "redis-master-name", "Sentinel master name; set, it selects Sentinel", &c.RedisMasterName},
		{"SHARDPLAN_REDIS_CLUSTER", "redis-cluster", "use Redis Cluster (even with one seed address)", &c.RedisCluster},
		{"SHARDPLAN_REDIS_USERNAME", "redis-username", "Redis username (replaces REDIS_URL's)", &c.RedisUsername},
		{"SHARDPLAN_REDIS_PASSWORD", "redis-password", "Redis password (replaces REDIS_URL's; never logged)", &c.RedisPassword},
		{"SHARDPLAN_REDIS_DIAL_TIMEOUT", "redis-dial-timeout", "Redis connect timeout", &c.RedisDialTimeout},
		{"SHARDPLAN_REDIS_READ_TIMEOUT", "redis-read-timeout", "Redis socket read timeout", &c.RedisReadTimeout},
		{"SHARDPLAN_REDIS_WRITE_TIMEOUT", "redis-write-timeout", "Redis socket write timeout", &c.RedisWriteTimeout},
	}
}

// flagValue adapts a setting's pointer to flag.Value, parsing like the env var does.
type flagValue struct{ s setting }

func (v flagValue) String() string {
	if v.s.ptr == nil {
		return ""
	}
	return formatSetting(v.s.ptr)
}

func (v flagValue) Set(x string) error { return parseSetting(v.s.ptr, x) }

// IsBoolFlag lets a bool setting be given as a bare flag (-redis-cluster).
func (v flagValue) IsBoolFlag() bool { _, ok := v.s.ptr.(*bool); return ok }

func formatSetting(p any) string {
	switch p := p.(type) {
	case *string:
		return *p
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case *time.Duration:
		return p.String()
	case *bool:
		return strconv.FormatBool(*p)
	}
	return ""
}

func parseSetting(p any, x string) error {
	x = strings.TrimSpace(x)
	switch p := p.(type) {
	case *string:
		*p = x
	case *int:
		n, err := strconv.Atoi(x)
		if err != nil {
			return fmt.Errorf("%q is not an integer", x)
		}
		*p = n
	case *int64:
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", x)
		}
		*p = n
	case *float64:
		f, err := strconv.ParseFloat(x, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%q is not a number", x)
		}
		*p = f
	case *time.Duration:
		d, err := time.ParseDuration(x)
		if err != nil {
			return fmt.Errorf("%q is not a duration (e.g. 10s, 500ms)", x)
		}
		*p = d
	case *bool:
		b, err := strconv.ParseBool(x)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (true or false)", x)
		}
		*p = b
	}
	return nil
}

// loadConfig builds the config: defaults, then env (via getenv), then flags in args.
// A malformed or out-of-range value is an error naming its env variable and flag.
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	c := defaultConfig()
	set := c.settings()
	for _, s := range set {
		if v := getenv(s.env); v != "" {
			if err := parseSetting(s.ptr, v); err != nil {
				return c, fmt.Errorf("%s: %w", s.env, err)
			}
		}
	}
	fs := flag.NewFlagSet("shardplan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, s := range set {
		fs.Var(flagValue{s}, s.flag, s.usage+" (env "+s.env+")")
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return c, c.validate()
}

func (c config) validate() error {
	var errs []error
	bad := func(env, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{env}, args...)...))
	}
	if c.Addr == "" {
		bad("SHARDPLAN_ADDR", "must not be empty")
	}
	if c.RedisURL != "" {
		u, err := url.Parse(c.RedisURL)
		switch {
		case err != nil:
			bad("REDIS_URL", "is not a URL")
		case u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix":
			bad("REDIS_URL", "scheme %q is not redis, rediss or unix", u.Scheme)
		}
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		bad("SHARDPLAN_LOG_LEVEL", "%v", err)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		bad("SHARDPLAN_LOG_FORMAT", "%q is not json or text", c.LogFormat)
	}
	positive := []struct {
		env string
		v   int64
	}{
		{"SHARDPLAN_MAX_BODY_BYTES", c.MaxBodyBytes},
		{"SHARDPLAN_MAX_DEVICES", int64(c.MaxDevices)},
		{"SHARDPLAN_MAX_RANK", int64(c.MaxRank)},
		{"SHARDPLAN_MAX_MESH_AXES", int64(c.MaxMeshAxes)},
		{"SHARDPLAN_LIST_DEVICE_LIMIT", int64(c.ListDeviceLimit)},
		{"SHARDPLAN_MAX_INFLIGHT", int64(c.MaxInflight)},
		{"SHARDPLAN_MAX_COMPUTE", int64(c.MaxCompute)},
		{"SHARDPLAN_BODY_READ_TIMEOUT", int64(c.BodyReadTimeout)},
		{"SHARDPLAN_RATE_BURST", int64(c.RateBurst)},
		{"SHARDPLAN_CACHE_MAX_BYTES", c.CacheMaxBytes},
		{"SHARDPLAN_REQUEST_TIMEOUT", int64(c.RequestTimeout)},
		{"SHARDPLAN_SHUTDOWN_TIMEOUT", int64(c.ShutdownTimeout)},
		{"SHARDPLAN_MAX_RESPONSE_BYTES", c.MaxResponse},
		{"SHARDPLAN_MAX_ANSWER_BYTES", c.MaxAnswer},
		{"SHARDPLAN_MAX_GRAPH_DEPTH", int64(c.MaxGraphDepth)},
		{"SHARDPLAN_MAX_GRAPH_BODY_BYTES", c.MaxGraphBytes},
		{"SHARDPLAN_MAX_GRAPH_OPS", int64(c.MaxGraphOps)},
		{"SHARDPLAN_MAX_GRAPH_TENSORS", int64(c.MaxGraphTensors)},
		{"SHARDPLAN_MAX_MODULE_DEPTH", int64(c.MaxModuleDepth)},
		{"SHARDPLAN_MAX_JSON_DEPTH", int64(c.MaxJSONDepth)},
		{"SHARDPLAN_MAX_ELEMENTS", c.MaxElements},
		{"SHARDPLAN_MAX_TRANSFER_TENSORS", int64(c.MaxTransferTensors)},
		{"SHARDPLAN_MAX_TRANSFER_MOVES", int64(c.MaxTransferMoves)},
		{"SHARDPLAN_CACHE_TTL", int64(c.CacheTTL)},
		{"SHARDPLAN_CACHE_TIMEOUT", int64(c.CacheTimeout)},
		{"SHARDPLAN_REDIS_DIAL_TIMEOUT", int64(c.RedisDialTimeout)},
		{"SHARDPLAN_REDIS_READ_TIMEOUT", int64(c.RedisReadTimeout)},
		{"SHARDPLAN_REDIS_WRITE_TIMEOUT", int64(c.RedisWriteTimeout)},
	}
	for _, p := range positive {
		if p.v <= 0 {
			bad(p.env, "must be > 0")
		}
	}
	if c.GCPercent <= 0 {
		bad("SHARDPLAN_GC_PERCENT", "must be > 0 (GOGC=off turns the collector off)")
	}
	if c.MemoryLimit < 0 {
		bad("SHARDPLAN_MEMORY_LIMIT", "must be >= 0 (0: automatic)")
	} else if c.MemoryLimit > 0 && c.MemoryLimit < 2*c.CacheMaxBytes {
		bad("SHARDPLAN_MEMORY_LIMIT", "%d is below twice SHARDPLAN_CACHE_MAX_BYTES (%d): the plan cache alone may hold half of it, and the collector would run without pause", c.MemoryLimit, c.CacheMaxBytes)
	}
	if c.RateLimit < 0 {
		bad("SHARDPLAN_RATE_LIMIT", "must be >= 0 (0 turns rate limits off)")
	}
	if c.DrainDelay < 0 {
		bad("SHARDPLAN_DRAIN_DELAY", "must be >= 0")
	}
	if c.MaxDevices > 1<<30 {
		bad("SHARDPLAN_MAX_DEVICES", "%d is above the hard ceiling of %d", c.MaxDevices, 1<<30)
	}
	if c.MaxRank > 1024 {
		bad("SHARDPLAN_MAX_RANK", "%d is above the hard ceiling of 1024", c.MaxRank)
	}
	if c.MaxModuleDepth > 10000 {
		bad("SHARDPLAN_MAX_MODULE_DEPTH", "%d is above the hard ceiling of 10000", c.MaxModuleDepth)
	}
	if c.MaxJSONDepth > 10000 {
		bad("SHARDPLAN_MAX_JSON_DEPTH", "%d is above the hard ceiling of 10000 (encoding/json's own)", c.MaxJSONDepth)
	} else if need := jsonDepthFor(c.MaxGraphDepth); c.MaxJSONDepth > 0 && c.MaxJSONDepth < need {
		bad("SHARDPLAN_MAX_JSON_DEPTH", "%d is below the %d a graph of SHARDPLAN_MAX_GRAPH_DEPTH (%d) nested whiles needs; raise it or lower SHARDPLAN_MAX_GRAPH_DEPTH", c.MaxJSONDepth, need, c.MaxGraphDepth)
	}
	if c.MaxElements > 1<<55 {
		bad("SHARDPLAN_MAX_ELEMENTS", "%d is above the hard ceiling of 2^55 (byte sizes must fit int64)", c.MaxElements)
	}
	if c.MaxTransferTensors > 1<<30 {
		bad("SHARDPLAN_MAX_TRANSFER_TENSORS", "%d is above the hard ceiling of 2^30", c.MaxTransferTensors)
	}
	if c.MaxTransferMoves > 1<<30 {
		bad("SHARDPLAN_MAX_TRANSFER_MOVES", "%d is above the hard ceiling of 2^30", c.MaxTransferMoves)
	}
	if c.MaxMeshAxes > 64 {
		bad("SHARDPLAN_MAX_MESH_AXES", "%d is above the hard ceiling of 64", c.MaxMeshAxes)
	}
	if _, err := c.apiKeys(); err != nil {
		errs = append(errs, err)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		bad("SHARDPLAN_TLS_CERT", "and SHARDPLAN_TLS_KEY must be given together")
	}
	if len(errs) == 0 {
		// The Redis topology (URL, addresses, master name, cluster) as go-redis sees it.
		if err := c.cacheConfig().Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}

func (c config) limits() api.Limits {
	return api.Limits{
		MaxBodyBytes:    c.MaxBodyBytes,
		MaxDevices:      c.MaxDevices,
		MaxRank:         c.MaxRank,
		MaxMeshAxes:     c.MaxMeshAxes,
		ListDeviceLimit: c.ListDeviceLimit,
		RequestTimeout:  c.RequestTimeout,
		MaxInflight:     c.MaxInflight,
		MaxCompute:      c.MaxCompute,
		BodyReadTimeout: c.BodyReadTimeout,
		RateLimit:       c.RateLimit,
		RateBurst:       c.RateBurst,

		MaxResponseBytes:  c.MaxResponse,
		MaxAnswerBytes:    c.MaxAnswer,
		MaxGraphDepth:     c.MaxGraphDepth,
		MaxGraphBodyBytes: c.MaxGraphBytes,
		MaxGraphOps:       c.MaxGraphOps,
		MaxGraphTensors:   c.MaxGraphTensors,
		MaxModuleDepth:    c.MaxModuleDepth,
		MaxJSONDepth:      c.MaxJSONDepth,
		MaxElements:       c.MaxElements,

		MaxTransferTensors: c.MaxTransferTensors,
		MaxTransferMoves:   c.MaxTransferMoves,
	}
}

// redactURL hides the password of a URL (REDIS_URL) for logs.
func redactURL(s string) string {
	if s == "" {
		return ""
	}
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable, hidden)"
	}
	if q := u.Query(); q.Has("password") { // Sentinel URLs carry the master's password there
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// logAttrs is the config as log attributes, secrets redacted.
func (c config) logAttrs() []slog.Attr {
	var out []slog.Attr
	for _, s := range c.settings() {
		v := formatSetting(s.ptr)
		switch s.env {
		case "REDIS_URL":
			v = redactURL(v)
		case "SHARDPLAN_REDIS_PASSWORD":
			if v != "" {
				v = "xxxxx"
			}
		case "SHARDPLAN_API_KEYS":
			if n := len(splitList(v)); n > 0 {
				v = fmt.Sprintf("xxxxx (%d keys)", n)
			}
		}
		out = append(out, slog.String(s.env, v))
	}
	return out
}

// splitList splits a comma-separated setting, dropping blanks.
func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// minAPIKeyLen is the shortest API key accepted: a guessable key is no lock.
const minAPIKeyLen = 16

// apiKeys reads the API keys from SHARDPLAN_API_KEYS and SHARDPLAN_API_KEYS_FILE. Errors
// name the setting and the line, never a key.
func (c config) apiKeys() ([]string, error) {
	keys := splitList(c.APIKeys)
	if c.APIKeysFile != "" {
		b, err := os.ReadFile(c.APIKeysFile)
		if err != nil {
			return nil, fmt.Errorf("SHARDPLAN_API_KEYS_FILE: %w", err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.ContainsAny(line, " \t,") {
				return nil, fmt.Errorf("SHARDPLAN_API_KEYS_FILE: line %d: a key must not contain spaces or commas", i+1)
			}
			keys = append(keys, line)
		}
		if len(keys) == 0 {
			return nil, errors.New("SHARDPLAN_API_KEYS_FILE: the file holds no key; leave the setting empty to turn keys off")
		}
	}
	for i, k := range keys {
		if len(k) < minAPIKeyLen {
			return nil, fmt.Errorf("API key %d (of SHARDPLAN_API_KEYS, then SHARDPLAN_API_KEYS_FILE) is shorter than %d characters", i+1, minAPIKeyLen)
		}
	}
	return keys, nil
}

// jsonDepthFor is the JSON nesting a graph body of whiles nested graphDepth deep needs:
// three levels per while (the ops array, the op, its body) and a few for the request.
func jsonDepthFor(graphDepth int) int { return 3*graphDepth + 8 }
