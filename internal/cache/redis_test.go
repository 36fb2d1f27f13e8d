package cache

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientSelection asserts which concrete go-redis client each
// configuration builds. No server is needed: clients connect lazily.
func TestClientSelection(t *testing.T) {
	const (
		single   = "single"
		sentinel = "sentinel"
		cluster  = "cluster"
	)
	tests := []struct {
		name      string
		cfg       Config
		want      string
		backend   string
		wantAddrs []string
	}{
		{"redis URL", Config{RedisURL: "redis://127.0.0.1:6379/0"}, single, BackendRedis, []string{"127.0.0.1:6379"}},
		{"rediss URL with auth and db", Config{RedisURL: "rediss://u:secret@cache.example:6380/2"}, single, BackendRedis, []string{"cache.example:6380"}},
		{"unix socket", Config{RedisURL: "unix:///run/redis.sock?db=1"}, single, BackendRedis, []string{"/run/redis.sock"}},
		{"one explicit address", Config{Addrs: []string{"10.0.0.1:6379"}}, single, BackendRedis, []string{"10.0.0.1:6379"}},
		{"sentinel URL", Config{RedisURL: "redis://:spw@127.0.0.1:26379/0?master_name=mymaster&addr=127.0.0.1:26380"}, sentinel, BackendRedisSentinel, []string{"127.0.0.1:26379", "127.0.0.1:26380"}},
		{"sentinel from master name", Config{Addrs: []string{"s1:26379", "s2:26379"}, MasterName: "mymaster"}, sentinel, BackendRedisSentinel, []string{"s1:26379", "s2:26379"}},
		{"sentinel URL plus master name field", Config{RedisURL: "redis://s1:26379", MasterName: "m"}, sentinel, BackendRedisSentinel, []string{"s1:26379"}},
		{"cluster URL with addr", Config{RedisURL: "redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002"}, cluster, BackendRedisCluster, []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}},
		{"cluster URL with cluster=true", Config{RedisURL: "redis://127.0.0.1:7000?cluster=true&dial_timeout=1s"}, cluster, BackendRedisCluster, []string{"127.0.0.1:7000"}},
		{"cluster from addresses", Config{Addrs: []string{"n1:7000", "n2:7000"}}, cluster, BackendRedisCluster, []string{"n1:7000", "n2:7000"}},
		{"cluster from flag", Config{Addrs: []string{"cfg.example:6379"}, Cluster: true}, cluster, BackendRedisCluster, []string{"cfg.example:6379"}},
		{"cluster=false is single", Config{RedisURL: "redis://127.0.0.1:6379?cluster=false"}, single, BackendRedis, []string{"127.0.0.1:6379"}},
		{"URL plus extra addresses is cluster", Config{RedisURL: "redis://n1:7000", Addrs: []string{"n2:7000"}}, cluster, BackendRedisCluster, []string{"n1:7000", "n2:7000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRedis(tc.cfg)
			require.NoError(t, err)
			t.Cleanup(func() { _ = r.Close() })
			assert.Equal(t, tc.backend, r.Name())

			opts, _, err := universalOptions(tc.cfg)
			require.NoError(t, err)
			assert.Equal(t, tc.wantAddrs, opts.Addrs)

			switch c := r.Client().(type) {
			case *redis.Client:
				// NewFailoverClient returns a *redis.Client whose address is a marker.
				isSentinel := c.Options().Addr == "FailoverClient"
				if tc.want == sentinel {
					assert.True(t, isSentinel, "want a sentinel-backed client, got addr %q", c.Options().Addr)
				} else {
					assert.Equal(t, single, tc.want, "got a single-node client")
					assert.Equal(t, tc.wantAddrs[0], c.Options().Addr)
				}
			case *redis.ClusterClient:
				assert.Equal(t, cluster, tc.want, "got a cluster client")
			default:
				t.Fatalf("unexpected client type %T", c)
			}
		})
	}
}

func TestOptionsForRedis7(t *testing.T) {
	t.Run("defaults", func(t *testing.T) {
		o, _, err := universalOptions(Config{RedisURL: "redis://127.0.0.1:6379"})
		require.NoError(t, err)
		assert.True(t, o.DisableIdentity, "no CLIENT SETINFO on Redis 7.0")
		assert.True(t, o.ContextTimeoutEnabled, "context deadlines must cut in-flight reads")
		require.NotNil(t, o.MaintNotificationsConfig)
		assert.Equal(t, maintnotifications.ModeDisabled, o.MaintNotificationsConfig.Mode)
		assert.Equal(t, DefaultDialTimeout, o.DialTimeout)
		assert.Equal(t, DefaultReadTimeout, o.ReadTimeout)
		assert.Equal(t, DefaultWriteTimeout, o.WriteTimeout)
	})
	t.Run("fields over defaults, URL over fields", func(t *testing.T) {
		o, _, err := universalOptions(Config{
			RedisURL:    "redis://127.0.0.1:6379?read_timeout=300ms&cluster=true",
			DialTimeout: time.Second, ReadTimeout: 50 * time.Millisecond,
		})
		require.NoError(t, err)
		assert.Equal(t, time.Second, o.DialTimeout)
		assert.Equal(t, 300*time.Millisecond, o.ReadTimeout)
		assert.Equal(t, DefaultWriteTimeout, o.WriteTimeout)
		assert.True(t, o.DisableIdentity)
		assert.True(t, o.ContextTimeoutEnabled)
	})
	t.Run("credentials", func(t *testing.T) {
		o, _, err := universalOptions(Config{RedisURL: "redis://u:p@h:1/3", Password: "override"})
		require.NoError(t, err)
		assert.Equal(t, "u", o.Username)
		assert.Equal(t, "override", o.Password)
		assert.Equal(t, 3, o.DB)

		o, _, err = universalOptions(Config{RedisURL: "redis://su:sp@s:26379?master_name=m&password=mp"})
		require.NoError(t, err)
		assert.Equal(t, "su", o.SentinelUsername)
		assert.Equal(t, "sp", o.SentinelPassword)
		assert.Equal(t, "mp", o.Password)
		assert.Equal(t, "m", o.MasterName)
	})
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		msg  string
	}{
		{"unknown option", Config{RedisURL: "redis://:topsecret@h:6379?bogus=1"}, "unexpected option: bogus"},
		{"bad scheme", Config{RedisURL: "http://:topsecret@h:6379"}, "invalid URL scheme"},
		{"bad cluster flag", Config{RedisURL: "redis://:topsecret@h:6379?cluster=maybe"}, "not a boolean"},
		{"bad URL", Config{RedisURL: "redis://:topsecret@h:port:x"}, "REDIS_URL"},
		{"bad addr param", Config{RedisURL: "redis://:topsecret@h:6379?addr=nope"}, "addr"},
		{"bad address", Config{Addrs: []string{"nope"}}, "host:port"},
		{"negative timeout", Config{Timeout: -time.Second}, "timeout"},
		{"negative ttl", Config{TTL: -time.Second}, "ttl"},
		{"negative max bytes", Config{MaxBytes: -1}, "max bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.msg)
			assert.NotContains(t, err.Error(), "topsecret", "errors never carry the password")
			_, err = NewStore(tc.cfg)
			assert.Error(t, err)
		})
	}
	assert.NoError(t, Config{}.Validate(), "the zero Config is valid")
}

func TestNewStoreSelectsBackend(t *testing.T) {
	s, err := NewStore(Config{})
	require.NoError(t, err)
	assert.IsType(t, &LRU{}, s)
	assert.Equal(t, BackendMemory, s.Name())

	s, err = NewStore(Config{RedisURL: "redis://127.0.0.1:6379"})
	require.NoError(t, err)
	require.IsType(t, &Near{}, s, "Redis behind a near cache")
	assert.IsType(t, &Redis{}, s.(*Near).far)
	assert.Equal(t, BackendRedis, s.Name())
	require.NoError(t, s.Close())
}

func TestConfigLogValueRedacts(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	log.Info("start", "cache", Config{RedisURL: "redis://u:topsecret@h:6379?master_name=m&password=alsosecret", Password: "third"})
	out := buf.String()
	assert.NotContains(t, out, "topsecret")
	assert.NotContains(t, out, "alsosecret")
	assert.NotContains(t, out, "third")
	assert.Contains(t, out, "cache.backend=redis")
	assert.Contains(t, out, "cache.password_set=true")
}
