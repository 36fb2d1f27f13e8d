#!/usr/bin/env python3
"""Extract compiled HLO modules from public repositories into internal/hlo/testdata/corpus.

Usage: extract.py <git-dir> <repo> <producer> <path-glob-or-list...>

Reads each file at the repository's HEAD (a bare git directory as `git --git-dir`
takes), cuts out every HLO module the file holds (the text between an `HloModule`
line and the end of its enclosing literal: a ```hlo fence, a JavaScript template
string or a C++ raw string), and writes it byte for byte as pasted to
internal/hlo/testdata/corpus/<producer>/<name>.hlo, appending a line to
internal/hlo/testdata/corpus/MANIFEST.tsv: file, producer, repo, path, commit, index.
"""
import os, re, subprocess, sys

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "internal", "hlo", "testdata", "corpus")

def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True, capture_output=True).stdout

def modules(text):
    """Yield the HLO modules of text, each cut at its literal's end."""
    for m in re.finditer(r"HloModule ", text):
        start = m.start()
        # the literal's end: a closing fence, backtick, or raw-string terminator
        ends = [i for i in (text.find("\n```", start), text.find("`", start), text.find(')"', start)) if i >= 0]
        end = min(ends) if ends else len(text)
        yield text[start:end].rstrip() + "\n"

def main():
    gitdir, repo, producer, *paths = sys.argv[1:]
    commit = git(gitdir, "rev-parse", "HEAD").decode().strip()
    os.makedirs(os.path.join(OUT, producer), exist_ok=True)
    with open(os.path.join(OUT, "MANIFEST.tsv"), "a") as man:
        for path in paths:
            text = git(gitdir, "show", f"HEAD:{path}").decode()
            for i, mod in enumerate(modules(text)):
                if not re.search(r"(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute|collective-broadcast|send|recv)(-start)?\(", mod):
                    continue
                base = re.sub(r"[^A-Za-z0-9_.=-]+", "_", path.split("/", 2)[-1].rsplit(".", 1)[0])
                name = f"{producer}/{base}{'_' + str(i) if i else ''}.hlo"
                with open(os.path.join(OUT, name), "w") as f:
                    f.write(mod)
                man.write(f"{name}\t{producer}\t{repo}\t{path}\t{commit}\t{i}\n")

main()
