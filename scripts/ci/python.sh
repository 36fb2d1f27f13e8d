#!/usr/bin/env bash
# Make sure python3 and pip are available for the Python client tests
# (go test -run PythonClient ./cmd/shardplan-server/), and Debian's python3-torch for the reference
# executor's test (go test -run PythonExecutor ./cmd/shardplan-server/, which runs /usr/bin/python3
# with torch.distributed's gloo backend on CPU). Installs each only when missing; the
# client itself needs nothing beyond the standard library (pip is there for the test
# that installs it without a package index).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

if command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
	echo "python3 present: $(python3 --version 2>&1), $(python3 -m pip --version 2>&1 | cut -d' ' -f1-2)"
else
	apt_install python3 python3-pip
	echo "installed: $(python3 --version 2>&1)"
fi

torch_ok() { /usr/bin/python3 -c 'import torch, torch.distributed as d; assert d.is_available(); print(torch.__version__)' 2>/dev/null; }
if v=$(torch_ok); then
	echo "torch present for /usr/bin/python3: $v"
else
	apt_install python3-torch
	v=$(torch_ok) || { echo "python3-torch installed but /usr/bin/python3 cannot import torch.distributed" >&2; exit 1; }
	echo "installed python3-torch: $v"
fi
