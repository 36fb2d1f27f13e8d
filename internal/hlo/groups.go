package hlo

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseGroups reads replica_groups in either printed form: the list form
// {{0,1},{2,3}} ({} is one group of every device, returned as nil) or the iota form
// [G,S]<=[d0,d1,...]T(p0,p1,...) (iota over the dims, transposed by the permutation,
// cut into G groups of S). Device ids must be below maxDevices.
func ParseGroups(text string, maxDevices int) ([][]int, error) {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, "[") {
		return parseIotaGroups(text, maxDevices)
	}
	if strings.HasPrefix(text, "mesh[") {
		nm, err := ParseNamedMesh(text, maxDevices)
		if err != nil {
			return nil, err
		}
		return nm.Groups(), nil
	}
	groups, err := parseListGroups(text, maxDevices, maxDevices)
	if err != nil {
		return nil, err
	}
	seen := map[int]int{}
	for gi, g := range groups {
		for _, id := range g {
			if prev, dup := seen[id]; dup {
				if prev == gi {
					return nil, fmt.Errorf("device %d is listed twice in group %d; a device is in one group once", id, gi)
				}
				return nil, fmt.Errorf("device %d is in groups %d and %d; a device is in one group", id, prev, gi)
			}
			seen[id] = gi
		}
	}
	return groups, nil
}

// parseListGroups reads the list form {{0,1},{2,3}}: ids below maxDevices, at most
// maxEntries in all.
func parseListGroups(text string, maxDevices, maxEntries int) ([][]int, error) {
	if !strings.HasPrefix(text, "{") || !strings.HasSuffix(text, "}") {
		return nil, fmt.Errorf("expected {{0,1},...} or [G,S]<=[dims]T(perm), got %q", clip(text))
	}
	inner := strings.TrimSpace(text[1 : len(text)-1])
	if inner == "" {
		return nil, nil
	}
	var groups [][]int
	total := 0
	for inner != "" {
		if inner[0] != '{' {
			return nil, fmt.Errorf("expected '{' opening a group at %q", clip(inner))
		}
		end := strings.IndexByte(inner, '}')
		if end < 0 {
			return nil, fmt.Errorf("unclosed group at %q", clip(inner))
		}
		ids, err := intList(inner[1:end], maxDevices)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("group %d is empty; every group lists its devices", len(groups))
		}
		total += len(ids)
		if total > maxEntries {
			return nil, fmt.Errorf("the groups list more than %d devices", maxEntries)
		}
		groups = append(groups, ids)
		inner = strings.TrimSpace(inner[end+1:])
		inner = strings.TrimSpace(strings.TrimPrefix(inner, ","))
	}
	return groups, nil
}

// ParsePairs reads source_target_pairs {{0,1},{1,2}}.
func ParsePairs(text string, maxDevices int) ([][2]int, error) {
	// A device may send to (or receive from) several: the pairs are bounded by the
	// text's length only.
	groups, err := parseListGroups(strings.TrimSpace(text), 2*maxDevices, len(text))
	if err != nil {
		return nil, err
	}
	pairs := make([][2]int, len(groups))
	for i, g := range groups {
		if len(g) != 2 {
			return nil, fmt.Errorf("pair %d has %d ids; a pair is {source,target}", i, len(g))
		}
		if g[0] >= maxDevices || g[1] >= maxDevices {
			return nil, fmt.Errorf("pair %d names device %d; devices are below %d", i, max(g[0], g[1]), maxDevices)
		}
		pairs[i] = [2]int{g[0], g[1]}
	}
	return pairs, nil
}

func parseIotaGroups(text string, maxDevices int) ([][]int, error) {
	shapeText, rest, ok := strings.Cut(text, "<=")
	if !ok {
		return nil, fmt.Errorf("expected [G,S]<=[dims] in %q", clip(text))
	}
	shape, err := bracketInts(shapeText, maxDevices)
	if err != nil {
		return nil, err
	}
	if len(shape) != 2 {
		return nil, fmt.Errorf("the iota groups' shape [G,S] has %d numbers, want 2", len(shape))
	}
	dimsText, permText, hasPerm := strings.Cut(rest, "T")
	dims, err := bracketInts(dimsText, maxDevices)
	if err != nil {
		return nil, err
	}
	perm := make([]int, len(dims))
	for i := range perm {
		perm[i] = i
	}
	if hasPerm {
		permText = strings.TrimSpace(permText)
		if !strings.HasPrefix(permText, "(") || !strings.HasSuffix(permText, ")") {
			return nil, fmt.Errorf("expected T(perm) after the dims, got %q", clip(permText))
		}
		perm, err = intList(permText[1:len(permText)-1], len(dims))
		if err != nil {
			return nil, err
		}
		seen := make([]bool, len(dims))
		for _, q := range perm {
			if seen[q] {
				return nil, fmt.Errorf("T(%s) is not a permutation of the %d dims", permText[1:len(permText)-1], len(dims))
			}
			seen[q] = true
		}
		if len(perm) != len(dims) {
			return nil, fmt.Errorf("T(...) has %d entries for %d dims", len(perm), len(dims))
		}
	}
	n := 1
	for _, d := range dims {
		if d < 1 {
			return nil, fmt.Errorf("iota dims must be >= 1")
		}
		n *= d
		if n > maxDevices {
			return nil, fmt.Errorf("the iota covers more than %d devices", maxDevices)
		}
	}
	if shape[0]*shape[1] != n {
		return nil, fmt.Errorf("[%d,%d] groups need %d devices, the iota has %d", shape[0], shape[1], shape[0]*shape[1], n)
	}
	ids := Iota(dims, perm)
	groups := make([][]int, shape[0])
	for g := range groups {
		groups[g] = ids[g*shape[1] : (g+1)*shape[1]]
	}
	return groups, nil
}

// Iota lists 0..prod(dims)-1 reshaped to dims, transposed by perm (output dim i is input
// dim perm[i]) and flattened row-major.
func Iota(dims, perm []int) []int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	stride := make([]int, len(dims))
	s := 1
	for i := len(dims) - 1; i >= 0; i-- {
		stride[i] = s
		s *= dims[i]
	}
	tdims := make([]int, len(perm))
	for i, q := range perm {
		tdims[i] = dims[q]
	}
	out := make([]int, n)
	idx := make([]int, len(perm))
	for k := range out {
		v := 0
		for i, q := range perm {
			v += idx[i] * stride[q]
		}
		out[k] = v
		for i := len(idx) - 1; i >= 0; i-- {
			idx[i]++
			if idx[i] < tdims[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out
}

func bracketInts(text string, limit int) ([]int, error) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "[") || !strings.HasSuffix(text, "]") {
		return nil, fmt.Errorf("expected [n,...], got %q", clip(text))
	}
	return intList(text[1:len(text)-1], limit+1)
}

// intList parses "0,1, 2" with every value below limit.
func intList(text string, limit int) ([]int, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return []int{}, nil
	}
	parts := strings.Split(text, ",")
	out := make([]int, len(parts))
	for i, s := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 0 || v >= limit {
			return nil, fmt.Errorf("%q is not an integer from 0 to %d", clip(strings.TrimSpace(s)), limit-1)
		}
		out[i] = v
	}
	return out, nil
}

// Ints parses an attribute like dimensions={1,0} or dynamic_slice_sizes={512,1024}.
func Ints(text string) ([]int64, error) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "{") || !strings.HasSuffix(text, "}") {
		return nil, fmt.Errorf("expected {n,...}, got %q", clip(text))
	}
	inner := strings.TrimSpace(text[1 : len(text)-1])
	if inner == "" {
		return []int64{}, nil
	}
	var out []int64
	for s := range strings.SplitSeq(inner, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not an integer", clip(strings.TrimSpace(s)))
		}
		out = append(out, v)
	}
	return out, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
