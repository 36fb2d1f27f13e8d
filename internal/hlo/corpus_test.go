package hlo

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/shardplan/shardplan/internal/cost"
)

// corpusModule is one module of testdata/corpus: a compiled HLO module nobody here
// wrote, with its provenance (MANIFEST.tsv: file, producer, repository, path, commit,
// which module of the file).
type corpusModule struct {
	file, producer, repo, path, commit, which string
}

func readCorpus(t *testing.T) []corpusModule {
	f, err := os.Open(filepath.Join("testdata", "corpus", "MANIFEST.tsv"))
	require.NoError(t, err)
	defer f.Close()
	var out []corpusModule
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		require.Len(t, c, 6, sc.Text())
		out = append(out, corpusModule{c[0], c[1], c[2], c[3], c[4], c[5]})
	}
	require.NoError(t, sc.Err())
	return out
}

// TestCorpus: every module of the corpus parses as pasted and analyses without a mesh
// (its devices and mesh inferred), and every collective's count and bytes match a
// reading of the text that shares no code with the importer (readCollectives).
func TestCorpus(t *testing.T) {
	mods := readCorpus(t)
	model, ok := cost.Profile("tpu-v5p")
	require.True(t, ok)
	byProducer := map[string]int{}
	checked := 0 // byte figures compared
	for _, cm := range mods {
		t.Run(cm.file, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("testdata", "corpus", cm.file))
			require.NoError(t, err)
			m, err := Parse(string(src), Limits{})
			require.NoError(t, err, "%s (%s %s)", cm.file, cm.repo, cm.path)
			a, err := Analyze(context.Background(), m, Options{Model: model})
			require.NoError(t, err, "%s (%s %s)", cm.file, cm.repo, cm.path)
			byProducer[cm.producer]++

			want := readCollectives(string(src))
			got := map[string]int{}
			for _, c := range a.Collectives {
				if c.Opcode == "recv" { // priced with its send; the module holds none here
					continue
				}
				got[strings.TrimSuffix(c.Opcode, "-start")]++
			}
			for _, u := range a.Unmodeled {
				got[strings.TrimSuffix(u.Opcode, "-start")]++
			}
			counts := map[string]int{}
			for _, w := range want {
				counts[w.opcode]++
			}
			assert.Equal(t, counts, got, "collectives by opcode")

			byName := map[string]*Collective{}
			for i := range a.Collectives {
				c := &a.Collectives[i]
				byName[c.Computation+"/"+c.Name] = c
				assert.Positive(t, c.TripCount)
				switch {
				case c.GroupSize > 1 && c.InBytes > 0 && c.Kind != cost.CollectivePermute:
					assert.Positive(t, c.Cost.TimeUS, "%%%s is priced", c.Name)
				case c.GroupSize == 1:
					assert.Equal(t, "groups of one device: nothing moves", c.AxesNote, "%%%s at 0 says why", c.Name)
				}
			}
			for _, w := range want {
				c := byName[w.computation+"/"+w.name]
				if c == nil {
					continue // unmodeled
				}
				if w.outBytes >= 0 {
					assert.Equal(t, w.outBytes, c.OutBytes, "%%%s's result bytes", w.name)
					checked++
				}
				if w.inBytes >= 0 {
					assert.Equal(t, w.inBytes, c.InBytes, "%%%s's operand bytes", w.name)
					checked++
				}
			}
		})
	}
	t.Logf("modules accepted as pasted, by producer: %v of %d; %d byte figures compared", byProducer, len(mods), checked)
	assert.Greater(t, checked, 500, "the independent reading compares most collectives' bytes")
	assert.GreaterOrEqual(t, len(mods), 40)
	assert.GreaterOrEqual(t, len(byProducer), 3)
}

// A readCollective is one collective as a line-based reading of the text sees it.
type readCollective struct {
	computation, name, opcode string
	// outBytes and inBytes are -1 when the reading cannot tell (async tuples,
	// operands printed without a shape).
	outBytes, inBytes int64
}

var (
	compRE      = regexp.MustCompile(`^\s*(?:ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\))?\s*(?:->.*)?\{\s*$`)
	collRE      = regexp.MustCompile(`^(.*?)\s*\b(all-gather|all-reduce|reduce-scatter|all-to-all|ragged-all-to-all|collective-permute|collective-broadcast|send)(-start)?\((.*)$`)
	arrayRE     = regexp.MustCompile(`\b([a-z]+[0-9]*)\[([0-9, ]*)\]`)
	opRE        = regexp.MustCompile(`[a-z][\w\-]*\(`)
	blockRE     = regexp.MustCompile(`/\*.*?\*/`)
	sliceRE     = regexp.MustCompile(`slice_sizes=\{(\{[0-9,{} ]*\})\}`)
	sliceListRE = regexp.MustCompile(`\{([0-9, ]+)\}`)
)

// readCollectives reads the collectives of an HLO text line by line: instructions are
// the lines "name = ...", continued by the lines after them that are not; the result
// shape is the text before the opcode, the operands' shapes those of their definitions
// in the same computation.
func readCollectives(src string) []readCollective {
	type def struct{ comp, name, rest string }
	var instrs []def
	comp := ""
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		lhs, rhs, isDef := strings.Cut(t, " = ") // attributes on continuation lines print key=value
		lhs = strings.TrimSpace(strings.TrimPrefix(lhs, "ROOT "))
		isDef = isDef && lhs != "" && !strings.ContainsAny(lhs, " ({")
		switch {
		case t == "" || strings.HasPrefix(t, "//"):
		case !isDef && compRE.MatchString(line):
			comp = compRE.FindStringSubmatch(line)[1]
		case isDef:
			instrs = append(instrs, def{comp, strings.TrimPrefix(lhs, "%"), strings.TrimSpace(rhs)})
		case t == "}" || strings.HasPrefix(t, "},"):
		case len(instrs) > 0:
			instrs[len(instrs)-1].rest += " " + t
		}
	}
	shapes := map[string]string{}
	for _, in := range instrs {
		rest := stripBlockComments(in.rest)
		// the shape: up to the opcode, the first word followed by '('
		if !strings.HasPrefix(rest, "(") {
			if i := opRE.FindStringIndex(rest); i != nil {
				shapes[in.comp+"/"+in.name] = rest[:i[0]]
			}
			continue
		}
		depth := 0
		for j, c := range rest {
			if c == '(' {
				depth++
			} else if c == ')' {
				if depth--; depth == 0 {
					shapes[in.comp+"/"+in.name] = rest[:j+1]
					break
				}
			}
		}
	}
	var out []readCollective
	for _, in := range instrs {
		body := stripBlockComments(in.rest)
		if !strings.Contains(body, "all-") && !strings.Contains(body, "reduce-scatter") && !strings.Contains(body, "collective-") && !strings.Contains(body, "send(") {
			continue
		}
		c := collRE.FindStringSubmatch(body)
		if c == nil || strings.Contains(c[1], "=") {
			continue
		}
		rc := readCollective{computation: in.comp, name: in.name, opcode: c[2], outBytes: -1, inBytes: -1}
		if c[3] == "" && c[2] != "send" { // a send's result is (buffer, context, token)
			rc.outBytes = shapeBytes(c[1])
		}
		args := c[4][:closingParen(c[4])]
		var in64 int64
		known := args != ""
		for _, op := range splitTop(args) {
			op = strings.TrimSpace(op)
			name := op[strings.LastIndexAny(op, " %")+1:]
			s, ok := shapes[in.comp+"/"+name]
			if !ok || strings.TrimSpace(s) == "" {
				known = false
				break
			}
			in64 += shapeBytes(s)
		}
		if known {
			rc.inBytes = in64
		}
		ops := splitTop(args)
		first := func() string {
			op := strings.TrimSpace(ops[0])
			return shapes[in.comp+"/"+op[strings.LastIndexAny(op, " %")+1:]]
		}
		switch {
		case c[2] == "ragged-all-to-all" && len(ops) == 6:
			// what moves is the input buffer, not the output, offsets and sizes
			rc.inBytes = shapeBytes(first())
		case c[2] == "collective-permute" && len(ops) == 4 && sliceRE.MatchString(body):
			// in place: the slices of the input move
			s := first()
			elem := arrayRE.FindStringSubmatch(s)
			var moved int64
			for _, sl := range sliceListRE.FindAllStringSubmatch(sliceRE.FindStringSubmatch(body)[1], -1) {
				moved += shapeBytes(elem[1] + "[" + sl[1] + "]")
			}
			rc.inBytes = min(moved, shapeBytes(s))
		}
		out = append(out, rc)
	}
	return out
}

func stripBlockComments(s string) string {
	if !strings.Contains(s, "/*") {
		return s
	}
	return blockRE.ReplaceAllString(s, "")
}

func closingParen(s string) int {
	depth := 1
	for i, c := range s {
		switch c {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return len(s)
}

func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// shapeBytes sums the arrays of a printed shape: elements times the element's bytes
// (sub-byte types rounded up per array).
func shapeBytes(s string) int64 {
	bits := map[string]int64{"pred": 8, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16, "bf16": 16, "s32": 32, "u32": 32, "f32": 32,
		"s64": 64, "u64": 64, "f64": 64, "c64": 64, "c128": 128, "token": 0, "s4": 4, "u4": 4}
	var total int64
	for _, m := range arrayRE.FindAllStringSubmatch(s, -1) {
		b, ok := bits[m[1]]
		if !ok && strings.HasPrefix(m[1], "f8") {
			b, ok = 8, true
		}
		if !ok {
			continue
		}
		n := int64(1)
		for _, d := range strings.Split(m[2], ",") {
			if d = strings.TrimSpace(d); d != "" {
				v, _ := strconv.ParseInt(d, 10, 64)
				n *= v
			}
		}
		total += (n*b + 7) / 8
	}
	return total
}

// TestCorpusTripCounts: the loops of XLA's own test modules, counted by hand from their
// conditions, inits and steps (0 when the body never steps the variable: unknown).
func TestCorpusTripCounts(t *testing.T) {
	cases := map[string]map[string]int64{
		"xla/pipeliner_increment_index_by_one.hlo":          {"ar.1": 3},
		"xla/pipeliner_minimal_without_default_layouts.hlo": {"ar": 3},
		"xla/pipeliner_increment_index_by_one_permute.hlo":  {"cp": 14, "ar.1": 14},
		"xla/permute_decomposer_pipeline1.hlo":              {"cp": 2},
		"xla/pipeliner_recv_send_backwards.hlo":             {"send": 25},
		"xla/pipeliner_recv_send_loop_variant.hlo":          {"send.0": 2},
		"xla/permute_decomposer_basic.hlo":                  {"cp": 0},
		"xla/permute_decomposer_independent_cps.hlo":        {"cp1": 0, "cp2": 0, "cp3": 0},
		"xla/rs_combiner_in_while_loop.hlo":                 {"reduce-scatter.0": 0, "reduce-scatter.1": 0},
	}
	for file, want := range cases {
		src, err := os.ReadFile(filepath.Join("testdata", "corpus", file))
		require.NoError(t, err)
		a := analyzeText(t, string(src), "")
		got := map[string]int64{}
		for _, c := range a.Collectives {
			if c.TripCountKnown {
				got[c.Name] = c.TripCount
			} else {
				assert.Equal(t, int64(1), c.TripCount, "an unknown count is counted once")
				assert.Contains(t, c.TripCountNote, "is not known")
				got[c.Name] = 0
			}
		}
		assert.Equal(t, want, got, file)
	}
}
