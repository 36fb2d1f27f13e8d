import unittest

from shardplan import expand_pair_runs, expand_rank_run, expand_transfer_runs, rank_schedule, step_pairs, step_transfers


class ListsTest(unittest.TestCase):
    def test_pair_runs(self):
        runs = [{"from": 4, "to": 0, "from_step": 1, "to_step": 1, "count": 3},
                {"from": 0, "to": 7, "from_step": 0, "to_step": 0, "count": 1}]
        self.assertEqual(expand_pair_runs(runs), [[4, 0], [5, 1], [6, 2], [0, 7]])
        self.assertEqual(step_pairs({"pairs": [[1, 2]]}), [[1, 2]])
        self.assertEqual(step_pairs({"pair_runs": runs})[-1], [0, 7])

    def test_transfer_runs(self):
        first = {"from": 1, "to": 0, "ranges": [[0, 4], [8, 16]], "source_local": [[0, 4], [0, 8]],
                 "target_local": [[0, 4], [0, 8]], "bytes": 128}
        step = {"from": 1, "to": 0, "ranges": [[4, 4], [0, 0]], "source_local": [[0, 0], [0, 0]],
                "target_local": [[4, 4], [0, 0]], "bytes": 0}
        got = expand_transfer_runs([{"first": first, "step": step, "count": 3}])
        self.assertEqual(len(got), 3)
        self.assertEqual(got[2]["from"], 3)
        self.assertEqual(got[2]["ranges"], [[8, 12], [8, 16]])
        self.assertEqual(got[2]["target_local"], [[8, 12], [0, 8]])
        self.assertEqual(got[1]["bytes"], 128)
        self.assertEqual(step_transfers({"transfers": [first]}), [first])


    def test_rank_runs(self):
        op = {"op": "recv", "peer": 1, "tensor": 0, "global": [[0, 4], [4, 8]], "dst": "tile",
              "dst_local": [[0, 4], [4, 8]], "reduce": True, "bytes": 64, "offset": 0, "tag": 0}
        first = {"rank": 0, "buffers": [{"tensor": 0, "buffer": "tile", "index": 0, "global": [[0, 4], [0, 4]]}],
                 "phases": [{"phase": 0, "bucket": 0, "collective": "all_reduce", "group": [0, 1], "ops": [op]}]}
        step = {"rank": 2, "buffers": [{"tensor": 0, "index": 0, "global": [[4, 4], [0, 0]]}],
                "phases": [{"phase": 0, "bucket": 0, "group": [2, 2],
                            "ops": [{"peer": 2, "tensor": 0, "global": [[4, 4], [0, 0]], "dst_local": [[0, 0], [0, 0]],
                                     "bytes": 0, "offset": 0, "tag": 0}]}]}
        run = {"first": first, "step": step, "count": 3}
        third = expand_rank_run(run, 2)
        self.assertEqual(third["rank"], 4)
        self.assertEqual(third["buffers"][0]["global"], [[8, 12], [0, 4]])
        self.assertEqual(third["buffers"][0]["buffer"], "tile")
        ph = third["phases"][0]
        self.assertEqual(ph["group"], [4, 5])
        self.assertEqual(ph["collective"], "all_reduce")
        self.assertEqual(ph["ops"][0]["peer"], 5)
        self.assertIs(ph["ops"][0]["reduce"], True)
        self.assertEqual(ph["ops"][0]["global"], [[8, 12], [4, 8]])
        self.assertEqual(rank_schedule({"rank_runs": [run]}, 4), third)
        self.assertEqual(rank_schedule({"rank_runs": [run]}, 0), first)
        self.assertIsNone(rank_schedule({"rank_runs": [run]}, 3))
        self.assertIsNone(rank_schedule({"rank_runs": [run]}, 6))
        self.assertEqual(rank_schedule({"ranks": [first]}, 0), first)
        with self.assertRaises(IndexError):
            expand_rank_run(run, 3)


if __name__ == "__main__":
    unittest.main()
