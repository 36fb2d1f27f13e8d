package nccltests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Collective names an nccl-tests benchmark by its program name without "_perf".
type Collective string

// The collectives nccl-tests measures.
const (
	AllReduce     Collective = "all_reduce"
	AllGather     Collective = "all_gather"
	ReduceScatter Collective = "reduce_scatter"
	AllToAll      Collective = "alltoall"
	SendRecv      Collective = "sendrecv"
	Broadcast     Collective = "broadcast"
	Reduce        Collective = "reduce"
	Gather        Collective = "gather"
	Scatter       Collective = "scatter"
	HyperCube     Collective = "hypercube"
)

var collectiveAliases = map[string]Collective{
	"all_reduce": AllReduce, "allreduce": AllReduce,
	"all_gather": AllGather, "allgather": AllGather,
	"reduce_scatter": ReduceScatter, "reducescatter": ReduceScatter,
	"alltoall": AllToAll, "all_to_all": AllToAll,
	"sendrecv": SendRecv, "send_recv": SendRecv,
	"broadcast": Broadcast, "reduce": Reduce, "gather": Gather, "scatter": Scatter,
	"hypercube": HyperCube,
}

// ParseCollective reads a collective's name as nccl-tests spells it ("all_reduce",
// "alltoall", with or without "_perf") or in the planner's spelling ("all_to_all",
// "send_recv").
func ParseCollective(s string) (Collective, bool) {
	s = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), "_perf")
	c, ok := collectiveAliases[s]
	return c, ok
}

// Measurement is one group of a table row: the out-of-place or the in-place run.
type Measurement struct {
	TimeUS float64 `json:"time_us"`
	// AlgBW and BusBW are in GB/s (1e9 bytes a second), as printed.
	AlgBW float64 `json:"algbw_gbps"`
	BusBW float64 `json:"busbw_gbps"`
	// Check is the group's last column as printed: the #wrong count ("0", "N/A") in
	// newer versions, the maximum error ("2e-07") in older ones.
	Check string `json:"check"`

	timeHalfUnit float64 // half the last printed digit of TimeUS
}

// Point is one row of the result table.
type Point struct {
	// Line is the row's 1-based line number in the input.
	Line  int    `json:"line"`
	Bytes int64  `json:"bytes"`
	Count int64  `json:"count"`
	Type  string `json:"type"`
	// Redop is "" when the output has no redop column; nccl-tests prints "none" for
	// collectives that do not reduce.
	Redop string `json:"redop,omitempty"`
	// Root is the root column (-1 when the collective has none); HasRoot says whether
	// the output has that column.
	Root       int          `json:"root"`
	HasRoot    bool         `json:"has_root"`
	OutOfPlace Measurement  `json:"out_of_place"`
	InPlace    *Measurement `json:"in_place,omitempty"`
}

// Device is one line of the "# Using devices" list.
type Device struct {
	Line   int    `json:"line"`
	Rank   int    `json:"rank"`
	Host   string `json:"host,omitempty"`
	Pid    int    `json:"pid"`
	Device int    `json:"device"`
	BusID  string `json:"bus_id"`
	Name   string `json:"name"`
}

// Result is one nccl-tests run.
type Result struct {
	// Collective is "" when neither the output nor a header key names it.
	Collective Collective `json:"collective,omitempty"`
	// Ranks, Nodes and GPUsPerNode are 0 when neither the device list nor a header key
	// gives them.
	Ranks       int      `json:"ranks,omitempty"`
	Nodes       int      `json:"nodes,omitempty"`
	GPUsPerNode int      `json:"gpus_per_node,omitempty"`
	Hosts       []string `json:"hosts,omitempty"`
	Devices     []Device `json:"devices,omitempty"`

	NThread      int    `json:"nthread,omitempty"`
	NGpus        int    `json:"ngpus,omitempty"`
	MinBytes     int64  `json:"min_bytes,omitempty"`
	MaxBytes     int64  `json:"max_bytes,omitempty"`
	NCCLVersion  string `json:"nccl_version,omitempty"`
	TestsVersion string `json:"tests_version,omitempty"`
	// AvgBusBW is the "# Avg bus bandwidth" figure; HasAvgBusBW says whether it was printed.
	AvgBusBW    float64 `json:"avg_busbw_gbps,omitempty"`
	HasAvgBusBW bool    `json:"has_avg_busbw"`

	// Header holds the "# key: value" lines.
	Header map[string]string `json:"header,omitempty"`
	Points []Point           `json:"points"`
}

// LineError reports input Parse cannot read. Line is 1-based; 0 means the input as a
// whole (for example, no table row at all).
type LineError struct {
	Line int
	Msg  string
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return "nccl-tests output: " + e.Msg
	}
	return fmt.Sprintf("nccl-tests output line %d: %s", e.Line, e.Msg)
}

var (
	prefixRes = []*regexp.Regexp{
		regexp.MustCompile(`^\s*\[\d+,\d+\]<(?:stdout|stderr)>:`),
		regexp.MustCompile(`^\s*\([\w.-]*(?:,? ?(?:rank|pid|ip|node)=[\w.:-]+)+\)\s`),
		regexp.MustCompile(`^\s*\d+:\s`),
		regexp.MustCompile(`^\s*\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?(?:\s|$)`),
	}
	headerKeyRe = regexp.MustCompile(`^#\s*([a-z][a-z0-9_]*):\s?(.*)$`)
	rankRe      = regexp.MustCompile(`^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+(\d+)\s+(?:on\s+(\S+)\s+)?device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$`)
	perfNameRe  = regexp.MustCompile(`\b([a-z_]+)_perf(?:_mpi)?\b`)
	avgRe       = regexp.MustCompile(`^#?\s*Avg bus bandwidth\s*:\s*(\S+)`)
	startRe     = regexp.MustCompile(`^#?\s*Collective test starting:\s*(\S+)`)
	testsVerRe  = regexp.MustCompile(`^#?\s*nccl-tests version\s+(\S+)`)
	ncclVerRe   = regexp.MustCompile(`^NCCL version\s+(\S+)`)
	nThreadRe   = regexp.MustCompile(`^#?\s*nThread\s`)
	wordRe      = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)
)

// ansiRe matches terminal colour codes, which some launchers wrap their prefixes in.
var ansiRe = regexp.MustCompile(`\x1b\[[0-9;]*m`)

// stripPrefixes removes terminal colour codes, then launcher and logger prefixes,
// stacked in any order.
func stripPrefixes(s string) string {
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansiRe.ReplaceAllString(s, "")
	}
	for {
		done := true
		for _, re := range prefixRes {
			if loc := re.FindStringIndex(s); loc != nil {
				s = s[loc[1]:]
				done = false
			}
		}
		if done {
			return s
		}
	}
}

// Parse reads one nccl-tests run. See the package documentation for what it accepts.
// Input holding more than one run is an error naming the line where the second starts;
// ParseAll reads such input.
func Parse(r io.Reader) (*Result, error) {
	runs, err := parse(r, false)
	if err != nil {
		return nil, err
	}
	return runs[0], nil
}

// ParseAll reads every run in the input, in order: a log of several nccl-tests
// programs run one after another (a run starts at its "nccl-tests version",
// "Collective test starting" or "nThread" line once the previous run has rows).
// Header keys at the top of the input, before any other non-blank line, apply to every
// run; keys given later belong to the run they appear in.
func ParseAll(r io.Reader) ([]*Result, error) {
	return parse(r, true)
}

// errNewRun tells parse that the line starts another run.
var errNewRun = errors.New("new run")

func parse(r io.Reader, multi bool) ([]*Result, error) {
	p := newParser(multi, nil, true)
	var runs []*Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		err := p.line(n, sc.Text())
		if errors.Is(err, errNewRun) {
			if err := p.finish(); err != nil {
				return nil, err
			}
			runs = append(runs, p.res)
			p = newParser(multi, p.preamble, false)
			err = p.line(n, sc.Text())
		}
		if err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &LineError{Line: n + 1, Msg: err.Error()}
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return append(runs, p.res), nil
}

// headerKey is a "# key: value" line.
type headerKey struct {
	key, value string
	line       int
}

func newParser(multi bool, preamble []headerKey, first bool) *parser {
	p := &parser{res: &Result{}, multi: multi, headerLine: map[string]int{}, rankLine: map[int]int{}, preamble: preamble, inPreamble: first}
	for _, h := range preamble {
		p.setHeader(h)
	}
	return p
}

func (p *parser) setHeader(h headerKey) {
	if p.res.Header == nil {
		p.res.Header = map[string]string{}
	}
	p.res.Header[h.key] = h.value
	p.headerLine[h.key] = h.line
}

type parser struct {
	res        *Result
	multi      bool           // ParseAll: a second run starts a new Result
	preamble   []headerKey    // header keys before the first run; every run inherits them
	inPreamble bool           // only header keys and blank lines so far in the input
	headerLine map[string]int // header key -> line
	rankLine   map[int]int    // rank -> index in res.Devices
	outColl    Collective     // collective the output itself names
	outCollAt  int
}

func (p *parser) line(n int, raw string) error {
	t := strings.TrimSpace(stripPrefixes(raw))
	if t == "" {
		return nil
	}
	res := p.res
	if strings.HasPrefix(t, "#") {
		if m := headerKeyRe.FindStringSubmatch(t); m != nil {
			if _, dup := p.headerLine[m[1]]; dup {
				return &LineError{Line: n, Msg: fmt.Sprintf("header key %q given twice (first on line %d)", m[1], p.headerLine[m[1]])}
			}
			h := headerKey{key: m[1], value: strings.TrimSpace(m[2]), line: n}
			p.setHeader(h)
			if p.inPreamble {
				p.preamble = append(p.preamble, h)
			}
			return nil
		}
	}
	p.inPreamble = false
	// Markdown renderers drop the leading "#"; these lines read the same with or without it.
	if m := avgRe.FindStringSubmatch(t); m != nil {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return &LineError{Line: n, Msg: fmt.Sprintf("average bus bandwidth %q is not a number", m[1])}
		}
		res.AvgBusBW, res.HasAvgBusBW = v, true
		return nil
	}
	if m := startRe.FindStringSubmatch(t); m != nil {
		if len(res.Points) > 0 {
			return p.secondRun(n)
		}
		return p.nameCollective(n, m[1])
	}
	if m := testsVerRe.FindStringSubmatch(t); m != nil {
		if len(res.Points) > 0 {
			return p.secondRun(n)
		}
		res.TestsVersion = m[1]
		return nil
	}
	if nThreadRe.MatchString(t) {
		if len(res.Points) > 0 {
			return p.secondRun(n)
		}
		return p.runHeader(n, t)
	}
	if m := rankRe.FindStringSubmatch(t); m != nil {
		return p.device(n, m)
	}
	if strings.HasPrefix(t, "#") {
		return nil
	}
	if m := ncclVerRe.FindStringSubmatch(t); m != nil {
		res.NCCLVersion = m[1]
		return nil
	}
	f := strings.Fields(t)
	if len(f) >= 2 && isUint(f[0]) && isUint(f[1]) {
		pt, err := parseRow(n, f)
		if err != nil {
			return err
		}
		res.Points = append(res.Points, pt)
		return nil
	}
	if len(res.Points) == 0 && p.outColl == "" {
		if m := perfNameRe.FindStringSubmatch(t); m != nil {
			if c, ok := ParseCollective(m[1]); ok {
				p.outColl, p.outCollAt = c, n
			}
		}
	}
	return nil
}

func (p *parser) secondRun(n int) error {
	if p.multi {
		return errNewRun
	}
	return &LineError{Line: n, Msg: fmt.Sprintf("a second run starts here after %d rows of the first; give one run per input", len(p.res.Points))}
}

func (p *parser) nameCollective(n int, name string) error {
	c, ok := ParseCollective(name)
	if !ok {
		return &LineError{Line: n, Msg: fmt.Sprintf("unknown collective %q", name)}
	}
	p.outColl, p.outCollAt = c, n
	return nil
}

// runHeader reads "# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: ...".
func (p *parser) runHeader(n int, t string) error {
	f := strings.Fields(strings.TrimPrefix(t, "#"))
	for i := 0; i+1 < len(f); i++ {
		var err error
		switch f[i] {
		case "nThread":
			p.res.NThread, err = strconv.Atoi(f[i+1])
		case "nGpus":
			p.res.NGpus, err = strconv.Atoi(f[i+1])
		case "minBytes":
			p.res.MinBytes, err = strconv.ParseInt(f[i+1], 10, 64)
		case "maxBytes":
			p.res.MaxBytes, err = strconv.ParseInt(f[i+1], 10, 64)
		default:
			continue
		}
		if err != nil {
			return &LineError{Line: n, Msg: fmt.Sprintf("%s %q is not an integer", f[i], f[i+1])}
		}
		i++
	}
	return nil
}

func (p *parser) device(n int, m []string) error {
	rank, err1 := strconv.Atoi(m[1])
	pid, err2 := strconv.Atoi(m[2])
	dev, err3 := strconv.Atoi(m[4])
	if err1 != nil || err2 != nil || err3 != nil {
		return &LineError{Line: n, Msg: "device line has a rank, pid or device number out of range"}
	}
	d := Device{Line: n, Rank: rank, Host: m[3], Pid: pid, Device: dev, BusID: m[5], Name: strings.TrimSpace(m[6])}
	if i, seen := p.rankLine[rank]; seen {
		prev := p.res.Devices[i]
		if prev.Host == d.Host && prev.Pid == d.Pid && prev.Device == d.Device {
			return nil // the same list printed again
		}
		return &LineError{Line: n, Msg: fmt.Sprintf("rank %d is listed again (first on line %d) for another process: the processes did not form one communicator", rank, prev.Line)}
	}
	p.rankLine[rank] = len(p.res.Devices)
	p.res.Devices = append(p.res.Devices, d)
	return nil
}

func isUint(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

var groupFields = [4]string{"time", "algbw", "busbw", "check"}

// parseRow reads one table row; f holds its fields.
func parseRow(n int, f []string) (Point, error) {
	bad := func(format string, a ...any) (Point, error) {
		return Point{}, &LineError{Line: n, Msg: fmt.Sprintf(format, a...)}
	}
	size, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return bad("size %q is out of range", f[0])
	}
	count, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return bad("count %q is out of range", f[1])
	}
	if len(f) < 3 || !wordRe.MatchString(f[2]) {
		return bad("a table row reads size, count, then a data type; found %q", strings.Join(f, " "))
	}
	pt := Point{Line: n, Bytes: size, Count: count, Type: f[2], Root: -1}
	rest := f[3:]
	if len(rest) > 0 && wordRe.MatchString(rest[0]) {
		pt.Redop, rest = rest[0], rest[1:]
	}
	if len(rest) == 9 || len(rest) == 5 {
		root, err := strconv.Atoi(rest[0])
		if err != nil {
			return bad("root %q is not an integer", rest[0])
		}
		pt.Root, pt.HasRoot, rest = root, true, rest[1:]
	}
	if len(rest) != 8 && len(rest) != 4 {
		return bad("a table row has %d fields; nccl-tests prints size, count, type, [redop], [root], then time, algbw, busbw and an error column for the out-of-place run and usually the in-place run", len(f))
	}
	var groups [2]Measurement
	for g := 0; g < len(rest)/4; g++ {
		m := &groups[g]
		for i, dst := range []*float64{&m.TimeUS, &m.AlgBW, &m.BusBW} {
			s := rest[4*g+i]
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 || v != v || v > 1e300 {
				return bad("%s %q is not a non-negative number", groupFields[i], s)
			}
			*dst = v
		}
		m.timeHalfUnit = halfUnit(rest[4*g])
		m.Check = rest[4*g+3]
		if m.Check != "N/A" {
			if _, err := strconv.ParseFloat(m.Check, 64); err != nil {
				return bad("error column %q is neither a number nor N/A", m.Check)
			}
		}
	}
	pt.OutOfPlace = groups[0]
	if len(rest) == 8 {
		ip := groups[1]
		pt.InPlace = &ip
	}
	return pt, nil
}

// halfUnit is half the value of the last digit printed in s ("12.90" -> 0.005).
func halfUnit(s string) float64 {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		s = s[:i]
	}
	d := 0
	if i := strings.IndexByte(s, '.'); i >= 0 {
		d = len(s) - i - 1
	}
	u := 0.5
	for ; d > 0; d-- {
		u /= 10
	}
	return u
}

func (p *parser) finish() error {
	res := p.res
	if len(res.Points) == 0 {
		return &LineError{Msg: "no result table row found (rows read: size count type [redop] [root] time algbw busbw ...)"}
	}
	// What the device list shows.
	var listRanks, listNodes, listPerNode int
	if len(res.Devices) > 0 {
		maxRank := 0
		for _, d := range res.Devices {
			maxRank = max(maxRank, d.Rank)
		}
		listRanks = maxRank + 1
		if len(res.Devices) == listRanks {
			perHost := map[string]int{}
			named := true
			for _, d := range res.Devices {
				if d.Host == "" {
					named = false
					break
				}
				if perHost[d.Host] == 0 {
					res.Hosts = append(res.Hosts, d.Host)
				}
				perHost[d.Host]++
			}
			if named {
				listNodes = len(res.Hosts)
				listPerNode = perHost[res.Hosts[0]]
				for _, c := range perHost {
					if c != listPerNode {
						listPerNode = 0
					}
				}
			} else {
				res.Hosts = nil
			}
		}
	}
	var err error
	if res.Ranks, err = p.headerInt("ranks", listRanks, "the device list shows"); err != nil {
		return err
	}
	if res.Nodes, err = p.headerInt("nodes", listNodes, "the device list names"); err != nil {
		return err
	}
	if res.GPUsPerNode, err = p.headerInt("gpus_per_node", listPerNode, "the device list shows"); err != nil {
		return err
	}
	if res.GPUsPerNode == 0 && res.Ranks > 0 && res.Nodes > 0 && res.Ranks%res.Nodes == 0 {
		res.GPUsPerNode = res.Ranks / res.Nodes
	}
	if res.Ranks > 0 && res.Nodes > 0 && res.GPUsPerNode > 0 && res.Nodes*res.GPUsPerNode != res.Ranks {
		return &LineError{Line: p.headerLine["gpus_per_node"], Msg: fmt.Sprintf("%d nodes of %d GPUs do not make %d ranks", res.Nodes, res.GPUsPerNode, res.Ranks)}
	}
	res.Collective = p.outColl
	if v, ok := res.Header["collective"]; ok {
		at := p.headerLine["collective"]
		c, ok := ParseCollective(v)
		if !ok {
			return &LineError{Line: at, Msg: fmt.Sprintf("unknown collective %q (all_reduce, all_gather, reduce_scatter, alltoall, sendrecv, broadcast, reduce, gather, scatter, hypercube)", v)}
		}
		if p.outColl != "" && p.outColl != c {
			return &LineError{Line: at, Msg: fmt.Sprintf("header says collective %s but line %d runs %s", c, p.outCollAt, p.outColl)}
		}
		res.Collective = c
	}
	return nil
}

// headerInt reconciles a header key with the figure the output shows (0: not shown).
func (p *parser) headerInt(key string, shown int, what string) (int, error) {
	v, ok := p.res.Header[key]
	if !ok {
		return shown, nil
	}
	at := p.headerLine[key]
	h, err := strconv.Atoi(v)
	if err != nil || h <= 0 {
		return 0, &LineError{Line: at, Msg: fmt.Sprintf("header %s %q is not a positive integer", key, v)}
	}
	if shown > 0 && shown != h {
		return 0, &LineError{Line: at, Msg: fmt.Sprintf("header says %s %d but %s %d", key, h, what, shown)}
	}
	return h, nil
}
