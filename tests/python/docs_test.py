#!/usr/bin/python3
"""Docs that cannot drift: docs/configuration.md against the binary.

1. Every flag of every command (`tandem CMD --help`) is in the configuration reference as
   `--flag` (in a table row or the text), and every `--flag` the reference names exists.
3. Every --pipeline step (the table in src/data/augment/pipeline_ops.cc) has a row in the
   reference's step table that names each of its parameters.
2. Every field of a real summary.json (a 2-step run with evaluation, an audit and a
   checkpoint directory) is named in the reference's Summary section, as are the fields
   of each source, of `throughput` and of `plan_inputs`.

    /usr/bin/python3 tests/python/docs_test.py --tandem build/tandem
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REFERENCE = os.path.join(ROOT, "docs", "configuration.md")
PLAN_REFERENCE = os.path.join(ROOT, "docs", "plan.md")
# The settings (docs/configuration.md); "" is the top level (--log-level, --quiet).
COMMANDS = ["", "launch", "worker", "trainer", "simulate", "inspect"]
# `plan` and `report` read a finished run: their flags are in docs/plan.md.
PLAN_COMMANDS = ["plan", "report"]
NOT_SETTINGS = {"--help", "--version"}


def flags_of(tandem, command):
    out = subprocess.run([tandem, *([command] if command else []), "--help"], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, f"tandem {command} --help exited {out.returncode}: {out.stderr}"
    flags = set()
    for names in re.findall(r"^\s+(?:-\w, )?(--[a-z0-9][a-z0-9,-]*)", out.stdout, re.M):
        flags |= {n for n in names.split(",") if n.startswith("--")}  # --x,--no-x
    return flags - NOT_SETTINGS


def section(text, title):
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"docs/configuration.md has no '## {title}' section"
    return m.group(1)


def pipeline_steps():
    """{step: [parameter, ...]} from the ops() table of src/data/augment/pipeline_ops.cc."""
    text = open(os.path.join(ROOT, "src", "data", "augment", "pipeline_ops.cc")).read()
    m = re.search(r"static const std::vector<OpDef> table = \{(.*?)\n  \};", text, re.S)
    assert m, "no ops() table in src/data/augment/pipeline_ops.cc"
    steps = {}
    for entry in re.split(r'\n      \{"', m.group(1))[1:]:
        name, _, rest = entry.partition('"')
        steps[name] = re.findall(r'\{"([a-z_0-9]+)", *[-0-9k]', rest)
    return steps


def step_problems(reference):
    problems = []
    for step, params in pipeline_steps().items():
        row = next((line for line in reference.splitlines() if line.startswith(f"| `{step}` |")), None)
        if row is None:
            problems.append(f"--pipeline step {step} has no row in docs/configuration.md's step table")
            continue
        problems += [f"docs/configuration.md's row of {step} does not name its parameter `{p}`"
                     for p in params if f"`{p}`" not in row]
    return problems


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tandem", required=True)
    args = p.parse_args()
    reference = open(REFERENCE).read()
    problems = []
    known = set()
    for commands, path in ((COMMANDS, REFERENCE), (PLAN_COMMANDS, PLAN_REFERENCE)):
        documented = set(re.findall(r"`(--[a-z0-9][a-z0-9-]*)", open(path).read()))
        taken = set()
        for command in commands:
            for flag in sorted(flags_of(args.tandem, command)):
                taken.add(flag)
                if flag not in documented:
                    problems.append(f"`tandem {command} {flag}` is not in {os.path.relpath(path, ROOT)}")
        if path == REFERENCE:
            for flag in sorted(documented - taken):
                problems.append(f"docs/configuration.md names {flag}, which no command takes")
        known |= taken

    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "summary.json")
        run = subprocess.run([args.tandem, "trainer", "--local-workers", "1", "--steps", "2", "--batch-size", "8",
                              "--dataset-size", "64", "--eval-data", "synthetic", "--eval-every", "1",
                              "--audit-samples", "--sagemaker-root", os.path.join(tmp, "none"),
                              "--summary-json", summary], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        s = json.load(open(summary))
    text = section(reference, "Summary")
    fields = set(s) | {f"workers.{k}" for w in s["workers"] for k in w} | \
        {f"throughput.{k}" for k in s["throughput"]} | {f"plan_inputs.{k}" for k in s["plan_inputs"]}
    for field in sorted(fields):
        name = field.split(".")[-1]
        if f"`{name}`" not in text:
            problems.append(f"summary field {field} is not in the Summary section of docs/configuration.md")

    problems += step_problems(reference)
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    print(f"OK: {len(known)} flags of {len(COMMANDS)} commands, {len(fields)} summary fields and "
          f"{len(pipeline_steps())} pipeline steps are documented")


if __name__ == "__main__":
    main()
