"""No source file over 400 lines and no function over 60 (docs/architecture.md: small
files, small functions, one owner per concept). Lists every offender with its size.

    python3 sizes_test.py [--root REPO]

C++ functions are found by their braces (string literals, raw strings and comments left
out); Python functions by the ast. Tests, fixtures and generated code are not counted.
"""
import argparse
import ast
import os
import re
import sys

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
CXX_DIRS = ["src", "include", "python/src"]
PY_DIRS = ["python/tandem"]
CONTROL = re.compile(r"^\s*(}\s*)?(if|for|while|switch|catch|do|else|try)\b")
SCOPE = re.compile(r"^\s*(template\s*<.*>\s*)?(namespace|class|struct|union|enum|extern)\b")


def strip_code(text):
    """`text` with comments, string and character literals (raw ones too) blanked, lines kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i + 2)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def cxx_functions(text):
    """(name line, first line, lines) of each function body whose enclosing block is not a function."""
    lines = strip_code(text).split("\n")
    stack = []  # per open brace: "function", "block" or "scope"
    found, header = [], ""
    for number, line in enumerate(lines, 1):
        for ch in line:
            if ch == "{":
                inside_function = any(kind == "function" for kind, _ in stack)
                statement = (header + " " + line.split("{")[0]).strip()
                if inside_function or CONTROL.match(line) or SCOPE.match(statement) or "(" not in statement:
                    kind = "scope" if not inside_function and SCOPE.match(statement) else "block"
                else:
                    kind = "function"
                stack.append((kind, number))
            elif ch == "}" and stack:
                kind, start = stack.pop()
                if kind == "function" and not any(k == "function" for k, _ in stack):
                    found.append((start, number - start + 1))
        stripped = line.strip()
        ends = stripped.endswith((";", "{", "}")) or not stripped or stripped.startswith("#")
        header = "" if ends else (header + " " + stripped)[-400:]
    return found


def python_functions(text):
    tree = ast.parse(text)
    return [(node.lineno, node.end_lineno - node.lineno + 1) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def offenders(root):
    out = []
    for dirs, exts, functions in ((CXX_DIRS, (".cc", ".h"), cxx_functions), (PY_DIRS, (".py",), python_functions)):
        for d in dirs:
            for base, _, files in os.walk(os.path.join(root, d)):
                for f in sorted(files):
                    if not f.endswith(exts):
                        continue
                    path = os.path.join(base, f)
                    rel = os.path.relpath(path, root)
                    text = open(path, encoding="utf-8").read()
                    count = text.count("\n")
                    if count > MAX_FILE_LINES:
                        out.append(f"{rel}: {count} lines (at most {MAX_FILE_LINES}: split it by concept)")
                    for start, size in functions(text):
                        if size > MAX_FUNCTION_LINES:
                            out.append(f"{rel}:{start}: a function of {size} lines (at most {MAX_FUNCTION_LINES})")
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    args = parser.parse_args()
    found = offenders(args.root)
    for line in found:
        print(line)
    print(f"{len(found)} over the limits")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
