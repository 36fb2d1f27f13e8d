package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pythonClientMinTests is the floor on the tests "Ran N tests" must report: the
// converter tests plus the client tests. pythonClientMinLive is the floor on the
// tests of tests/test_client.py that must pass (not skip), so that a client class
// skipped for want of SHARDPLAN_URL cannot pass silently.
const (
	pythonClientMinTests = 45
	pythonClientMinLive  = 15
	pythonClientTimeout  = 3 * time.Minute
)

var (
	ranRE      = regexp.MustCompile(`(?m)^Ran (\d+) tests? in `)
	liveOKRE   = regexp.MustCompile(`(?m)\(tests\.test_client\.[^)]*\) \.\.\. ok$`)
	liveSkipRE = regexp.MustCompile(`(?m)\(tests\.test_client\.[^)]*\) \.\.\. skipped`)
)

// TestPythonClient runs the Python client's unittest suite (clients/python/tests)
// against the real service. Without python3 it skips, except under CI=true where it
// fails (scripts/ci/python.sh installs python3).
func TestPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err == nil {
		// The client supports Python 3.9+.
		if out, verr := exec.Command(python, "-c", "import sys; sys.exit(sys.version_info < (3, 9))").CombinedOutput(); verr != nil {
			err = errors.New("python3 is older than 3.9: " + strings.TrimSpace(string(out)))
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("python3 is required under CI (run scripts/ci/python.sh): %v", err)
		}
		t.Skipf("python3 unavailable: %v", err)
	}

	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	pyroot := filepath.Join(repo, "clients", "python")
	if _, err := os.Stat(filepath.Join(pyroot, "shardplan", "__init__.py")); err != nil {
		t.Fatalf("python client not found: %v", err)
	}

	base, _, _, serverLog := startServer(t, map[string]string{"SHARDPLAN_LOG_LEVEL": "warn"})

	ctx, cancel := context.WithTimeout(t.Context(), pythonClientTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover",
		"-s", filepath.Join(pyroot, "tests"), "-t", pyroot, "-v")
	cmd.Dir = pyroot
	cmd.Env = pythonEnv(os.Environ(), pyroot, base)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	output := string(out)
	if ctx.Err() != nil {
		t.Fatalf("python client tests timed out after %s:\n%s\nserver log:\n%s", pythonClientTimeout, output, serverLog.String())
	}
	if err != nil {
		t.Fatalf("python client tests failed (%v):\n%s\nserver log:\n%s", err, output, serverLog.String())
	}

	m := ranRE.FindStringSubmatch(output)
	if m == nil {
		t.Fatalf("no \"Ran N tests\" line in the unittest output:\n%s", output)
	}
	ran, _ := strconv.Atoi(m[1])
	live := len(liveOKRE.FindAllString(output, -1))
	skipped := liveSkipRE.FindAllString(output, -1)
	if ran < pythonClientMinTests || live < pythonClientMinLive || len(skipped) > 0 {
		t.Fatalf("python client tests did not all run: ran %d (want >= %d), %d live client tests passed (want >= %d), %d skipped:\n%s",
			ran, pythonClientMinTests, live, pythonClientMinLive, len(skipped), output)
	}
	t.Logf("python client: ran %d tests, %d against %s", ran, live, base)
	if testing.Verbose() {
		t.Log(output)
	}
}

// pythonEnv is env with SHARDPLAN_URL set to base, pyroot first on PYTHONPATH and no
// bytecode written into the source tree.
func pythonEnv(env []string, pyroot, base string) []string {
	out := make([]string, 0, len(env)+3)
	pythonPath := pyroot
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "SHARDPLAN_URL", "PYTHONDONTWRITEBYTECODE":
			continue
		case "PYTHONPATH":
			if v != "" {
				pythonPath += string(os.PathListSeparator) + v
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "SHARDPLAN_URL="+base, "PYTHONPATH="+pythonPath, "PYTHONDONTWRITEBYTECODE=1")
}
