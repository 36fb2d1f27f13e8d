package hlo

import (
	"fmt"
	"strconv"
	"strings"
)

// frameTables are the stack-frame tables of a module, in the order JAX prints them.
var frameTables = [...]string{"FileNames", "FunctionNames", "FileLocations", "StackFrames"}

// Frames are a module's stack-frame tables: an instruction's metadata stack_frame_id
// names a StackFrames entry, which names a FileLocations entry (file, function, line).
type Frames struct {
	FileNames     map[int]string
	FunctionNames map[int]string
	Locations     map[int]FileLocation
	StackFrames   map[int]StackFrame
}

// FileLocation is one FileLocations entry.
type FileLocation struct {
	FileNameID, FunctionNameID, Line, Column int
}

// StackFrame is one StackFrames entry: a location and its caller's frame.
type StackFrame struct {
	LocationID, ParentID int
}

// SourceLocation is where an instruction comes from in the user's program.
type SourceLocation struct {
	File     string
	Line     int
	Function string
}

// add records entry id of table kind from its printed value.
func (f *Frames) add(kind, id int, val string) error {
	switch kind {
	case 0, 1:
		s, err := strconv.Unquote(val)
		if err != nil {
			return fmt.Errorf("the name %s is not a quoted string", clip(val))
		}
		m := &f.FileNames
		if kind == 1 {
			m = &f.FunctionNames
		}
		if *m == nil {
			*m = map[int]string{}
		}
		(*m)[id] = s
	case 2:
		kv := keyValues(val)
		if f.Locations == nil {
			f.Locations = map[int]FileLocation{}
		}
		f.Locations[id] = FileLocation{FileNameID: kv["file_name_id"], FunctionNameID: kv["function_name_id"], Line: kv["line"], Column: kv["column"]}
	case 3:
		kv := keyValues(val)
		if f.StackFrames == nil {
			f.StackFrames = map[int]StackFrame{}
		}
		f.StackFrames[id] = StackFrame{LocationID: kv["file_location_id"], ParentID: kv["parent_frame_id"]}
	}
	return nil
}

// Resolve gives the source location of stack frame id: the frame's own file, line and
// function (the innermost call, where the op was written). ok is false when the
// tables do not hold it.
func (f *Frames) Resolve(id int) (SourceLocation, bool) {
	fr, ok := f.StackFrames[id]
	if !ok {
		return SourceLocation{}, false
	}
	loc, ok := f.Locations[fr.LocationID]
	if !ok {
		return SourceLocation{}, false
	}
	return SourceLocation{File: f.FileNames[loc.FileNameID], Line: loc.Line, Function: f.FunctionNames[loc.FunctionNameID]}, true
}

// keyValues reads "{a=1 b=2}" (or "a=1, b=2") into a map of integers; values that are
// not integers are left out.
func keyValues(val string) map[string]int {
	val = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(val), "{"), "}")
	out := map[string]int{}
	for _, f := range strings.FieldsFunc(val, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil {
			out[k] = n
		}
	}
	return out
}
