#!/usr/bin/env python3
"""How long each hog holds the server after its deadline.

    go build -o /tmp/shardplan-server ./cmd/shardplan-server
    python3 scripts/hog_hold.py /tmp/shardplan-server 60 testdata/hogs/*.http

For each corpus file (testdata/hogs/README.md) it starts the server on a free loopback
port with SHARDPLAN_REQUEST_TIMEOUT=2s, posts the request, and from the answer on polls
shardplan_computing_requests on /metrics every 50 ms until it is 0 (or CAP seconds have
passed). It prints the status, when it came, and the CPU time the server process spent
between the answer and the slot coming back (/proc/PID/stat, in clock ticks of 10 ms;
it includes answering the polls).
"""
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def expand(body):
    """Expands the corpus' ⟦seq N "FORMAT" "SEP"⟧ actions (%d and %[1]d are the index)."""
    def unquote(s):
        return s.replace('\\"', '"').replace('\\n', '\n')

    def seq(m):
        n, fmt, sep = int(m.group(1)), unquote(m.group(2)), unquote(m.group(3))
        return sep.join(fmt.replace('%[1]d', str(i)).replace('%d', str(i)).replace('%%', '%') for i in range(n))

    return re.sub(r'⟦seq (\d+) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"⟧', seq, body)


def read(path):
    head, body = open(path, encoding='utf-8').read().split('\n\n', 1)
    lines = [l for l in head.split('\n') if l and not l.startswith('#')]
    method, target = lines[0].split(' ', 1)
    headers = {}
    for l in lines[1:]:
        k, v = l.split(':', 1)
        if k != 'Status':
            headers[k] = v.strip()
    return method, target, headers, expand(body.rstrip('\n')).encode()


def cpu_seconds(pid):
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def computing(base):
    body = urllib.request.urlopen(base + '/metrics', timeout=10).read()
    return float(re.search(rb'^shardplan_computing_requests (\S+)$', body, re.M).group(1))


def main():
    binary, cap = sys.argv[1], float(sys.argv[2])
    for path in sys.argv[3:]:
        port = free_port()
        env = dict(os.environ, SHARDPLAN_ADDR=f'127.0.0.1:{port}', SHARDPLAN_REQUEST_TIMEOUT='2s', SHARDPLAN_LOG_LEVEL='error')
        server = subprocess.Popen([binary], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f'http://127.0.0.1:{port}'
        try:
            for _ in range(400):
                try:
                    urllib.request.urlopen(base + '/healthz', timeout=1)
                    break
                except OSError:
                    time.sleep(0.05)
            method, target, headers, body = read(path)
            start = time.time()
            try:
                status = urllib.request.urlopen(urllib.request.Request(base + target, data=body, headers=headers, method=method), timeout=600).status
            except urllib.error.HTTPError as e:
                status = e.code
            answered = time.time() - start
            cpu0, wall0, held = cpu_seconds(server.pid), time.time(), None
            while time.time() - wall0 < cap:
                if computing(base) == 0:
                    held = cpu_seconds(server.pid) - cpu0
                    break
                time.sleep(0.05)
            name = os.path.basename(path)
            if held is None:
                print(f'{name}: {status} after {answered:.2f} s; still computing {cap:.0f} s later, {cpu_seconds(server.pid) - cpu0:.1f} s CPU so far', flush=True)
            else:
                print(f'{name}: {status} after {answered:.2f} s; slot back {time.time() - wall0:.2f} s later, {held * 1000:.0f} ms CPU', flush=True)
        finally:
            server.terminate()
            server.wait()


if __name__ == '__main__':
    main()
