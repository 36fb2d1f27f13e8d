package hlo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func corpusText(t *testing.T, file string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "corpus", file))
	require.NoError(t, err)
	return string(src)
}

func collectiveNamed(t *testing.T, a *Analysis, name string) *Collective {
	t.Helper()
	for i := range a.Collectives {
		if a.Collectives[i].Name == name {
			return &a.Collectives[i]
		}
	}
	require.Failf(t, "no collective", "%%%s", name)
	return nil
}

// TestRealDumps: each reading rule on the module of XLA's tests that shows it
// (testdata/corpus/MANIFEST.tsv gives each file's repository, path and commit).
func TestRealDumps(t *testing.T) {
	for _, tc := range []struct {
		file, name string
		size       int
		in         int64 // -1: not checked
		trips      int64
		devices    int
	}{
		// windowed einsum: the counter goes +1 then +1 again each trip, bound 4: 2 trips
		{"xla/windowed_einsum_ag_loops_stream_ids.hlo", "collective-permute.send_first_lhs_shard", 2, 512 * 24576 * 2, 2, 4},
		// channel_id without use_global_device_ids: replicas {0,1} over both partitions
		// (f32[4,8] scattered to f32[4,2]: 4 devices); before, a group of 2
		{"xla/rs_decomposer_cross_replica_and_partition.hlo", "rs", 4, 4 * 8 * 4, 1, 4},
		// a reduce-scatter of two operands to a tuple of results
		{"xla/rs_decomposer_tuple_flattened_id.hlo", "rs", 4, 2 * 4 * 8 * 4, 1, 4},
		// in-place collective-permute: its slice_sizes={{2,4,128}} of f32 move, not
		// the input, output and index tuples
		{"xla/async_creator_inplace_permute.hlo", "collective-permute", 2, 2 * 4 * 128 * 4, 1, 8},
		// two slices {1,8,128} of f32
		{"xla/parser_collective_permute_multiple_read_write.hlo", "root", 2, 2 * 8 * 128 * 4, 1, 4},
		// ragged-all-to-all: the input buffer bf16[1024,256], not its six operands
		{"xla/parser_ragged_all_to_all.hlo", "ra2a", 1, 1024 * 256 * 2, 1, 1},
		// a scheduled all-gather-start over {{0,1}}
		{"xla/lhs_all_gather_async_simple.hlo", "ag-start", 2, 8 * 256 * 256 * 4, 1, 2},
	} {
		t.Run(tc.file, func(t *testing.T) {
			a := analyzeText(t, corpusText(t, tc.file), "")
			c := collectiveNamed(t, a, tc.name)
			assert.Equal(t, tc.size, c.GroupSize)
			if tc.in >= 0 {
				assert.Equal(t, tc.in, c.InBytes)
			}
			assert.Equal(t, tc.trips, c.TripCount)
			assert.True(t, c.TripCountKnown, c.TripCountNote)
			assert.Equal(t, tc.devices, a.Devices, a.DevicesNote)
			if c.GroupSize > 1 && c.InBytes > 0 {
				assert.Positive(t, c.Cost.TimeUS)
			}
		})
	}
}

// TestCrossReplicaAndPartitionNote: the expanded groups say why they are larger than
// listed.
func TestCrossReplicaAndPartitionNote(t *testing.T) {
	a := analyzeText(t, corpusText(t, "xla/rs_decomposer_cross_replica_and_partition.hlo"), "")
	c := collectiveNamed(t, a, "rs")
	assert.Contains(t, a.DevicesNote, "its listed replicas run across every partition")
	assert.Contains(t, c.AxesNote, "the listed replicas run across all 2 partitions")
	// With the counts in the header the same rule reads them from there.
	src := "HloModule m, replica_count=2, num_partitions=4\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\nENTRY e {\n  p = f32[8] parameter(0)\n" +
		"  ar = f32[8] all-reduce(p), replica_groups={{0},{1}}, channel_id=1, to_apply=sum\n" +
		"  ROOT g = f32[8] all-reduce(ar), replica_groups={{0},{1}}, channel_id=2, use_global_device_ids=true, to_apply=sum\n}\n"
	a = analyzeText(t, src, "")
	assert.Equal(t, 4, collectiveNamed(t, a, "ar").GroupSize, "each replica across its 4 partitions")
	assert.Equal(t, 2, collectiveNamed(t, a, "ar").GroupCount)
	assert.Equal(t, 1, collectiveNamed(t, a, "g").GroupSize, "flattened ids: the groups as listed")
}

// TestHostTransfer: a send to the host (XLA's HostSendDoneSchedule) is not a
// neighbour permute: it is listed as unmodeled.
func TestHostTransfer(t *testing.T) {
	a := analyzeText(t, corpusText(t, "xla/memory_scheduler_host_send.hlo"), "")
	assert.Empty(t, a.Collectives)
	require.Len(t, a.Unmodeled, 1)
	assert.Equal(t, "send", a.Unmodeled[0].Opcode)
	assert.Contains(t, a.Unmodeled[0].Reason, "is_host_transfer=true")
}

// TestGroupSizeFromShapes: groups of every device (replica_groups={}) in a module
// without counts take their size from the shapes of a -start, a tuple gather and an
// async-wrapped scatter, as from a plain gather's.
func TestGroupSizeFromShapes(t *testing.T) {
	for name, tc := range map[string]struct {
		src, site string
		size      int
	}{
		"start": {`HloModule m, is_scheduled=true
ENTRY e {
  p = f32[8,256]{1,0} parameter(0)
  ags = (f32[8,256]{1,0}, f32[32,256]{1,0}) all-gather-start(p), replica_groups={}, dimensions={0}
  ROOT agd = f32[32,256]{1,0} all-gather-done(ags)
}
`, "ags", 4},
		"tuple": {`HloModule m
ENTRY e {
  p = f32[8,256]{1,0} parameter(0)
  q = f32[8,128]{1,0} parameter(1)
  ROOT ag = (f32[64,256]{1,0}, f32[64,128]{1,0}) all-gather(p, q), replica_groups={}, dimensions={0}
}
`, "ag", 8},
		"async-wrapped": {`HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
async_rs {
  x = f32[64,16]{1,0} parameter(0)
  ROOT rs = f32[16,16]{1,0} reduce-scatter(x), replica_groups={}, dimensions={0}, to_apply=sum
}, execution_thread="main"
ENTRY e {
  p = f32[64,16]{1,0} parameter(0)
  s = ((f32[64,16]{1,0}), f32[16,16]{1,0}, u32[]) async-start(p), calls=async_rs
  ROOT d = f32[16,16]{1,0} async-done(s), calls=async_rs
}
`, "rs", 4},
	} {
		t.Run(name, func(t *testing.T) {
			a := analyzeText(t, tc.src, "")
			c := collectiveNamed(t, a, tc.site)
			assert.Equal(t, tc.size, c.GroupSize)
			assert.Equal(t, tc.size, a.Devices)
			assert.Positive(t, c.Cost.TimeUS)
			assert.Equal(t, int64(1), c.TripCount, "async-done(...), calls= is not a second run")
		})
	}
}

// TestNoEntry: a module without ENTRY runs its last computation, as XLA's parser
// takes it.
func TestNoEntry(t *testing.T) {
	src := "HloModule m, num_partitions=4\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\nmain {\n  p = f32[8] parameter(0)\n  ROOT ar = f32[8] all-reduce(p), replica_groups={{0,1,2,3}}, to_apply=sum\n}\n"
	m, err := Parse(src, Limits{})
	require.NoError(t, err)
	assert.Equal(t, "main", m.Entry.Name)
	assert.True(t, m.EntryImplied)
	a := analyzeText(t, src, "")
	require.Len(t, a.Collectives, 1)
	assert.Equal(t, 4, a.Collectives[0].GroupSize)
}

// TestDevicesWithoutReplicaCount: a header with num_partitions and no replica_count
// (or none, as torch_xla prints) whose groups name more devices runs on those; a
// request's larger mesh sets the count, with a note.
func TestDevicesWithoutReplicaCount(t *testing.T) {
	src := "HloModule m, num_partitions=2\nsum {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\nENTRY e {\n  p = f32[8] parameter(0)\n  ROOT ar = f32[8] all-reduce(p), replica_groups={{0,1,2,3}}, use_global_device_ids=true, channel_id=1, to_apply=sum\n}\n"
	a := analyzeText(t, src, "")
	assert.Equal(t, 4, a.Devices)
	assert.Contains(t, a.DevicesNote, "the header gives num_partitions=2 and no replica_count")
	assert.Equal(t, 4, a.Collectives[0].GroupSize)

	a = analyzeText(t, corpusText(t, "torch_xla/pbtxt_gpt_gpt2_tp=2.hlo"), "x=8")
	assert.Equal(t, 8, a.Devices)
	assert.Contains(t, a.DevicesNote, "the request's mesh of 8 devices: the header gives no replica_count")
}
