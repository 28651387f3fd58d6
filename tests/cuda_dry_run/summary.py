"""The CUDA dry run's summary: a line a job, then every failure found (run.sh calls it).

A job's folder has `status` (exit code, seconds), `modules.txt` (the stand-in driver's line
a module: target, seconds since the previous module, ptxas seconds, kernel) and `log.txt`
(Ember's output). Failures: NVRTC compile errors, modules ptxas refused, launches the
stand-in refused, and panics outside cubecl's throughput probes. Those probes raise their
iteration count until a launch takes long enough, which launches that compute nothing
never do, so their count overflows and cubecl catches the panic; on a GPU they end.
"""

import re
import sys
from pathlib import Path

PANIC = re.compile(r"^thread '.*' \(\d+\) panicked at (.*)$")


def panics(log: str) -> tuple[int, list[str]]:
    """(panics inside the throughput probes, where each other panic happened)."""
    probes, others = 0, []
    blocks = re.split(r"(?m)^(?=thread '.*' \(\d+\) panicked at )", log)
    for block in blocks:
        first = block.splitlines()[0] if block else ""
        match = PANIC.match(first)
        if not match:
            continue
        if "throughput" in block:
            probes += 1
        else:
            message = block.splitlines()[1:2] or ["(no message)"]
            others.append(f"{match.group(1)}: {message[0][:200]}")
    return probes, others


def job(folder: Path) -> tuple[str, list[str]]:
    # No status: the job is still running, or was killed.
    state = folder / "status"
    status, seconds = state.read_text().split() if state.exists() else ("?", "?")
    modules = (folder / "modules.txt")
    lines = modules.read_text().splitlines() if modules.exists() else []
    lines = [line for line in lines if line.startswith("module ")]
    compile_s = sum(float(line.split()[4].rstrip("s")) for line in lines)
    ptxas_s = sum(float(line.split()[6].rstrip("s")) for line in lines)
    slowest = max(lines, key=lambda line: float(line.split()[4].rstrip("s")), default="")
    log = (folder / "log.txt").read_text(errors="replace")
    probe_panics, other_panics = panics(log)
    failures = []
    for match in re.finditer(r"\[Compilation Error\][^\n]*\n((?:    [^\n]*\n){1,3})", log):
        failures.append("NVRTC: " + " / ".join(l.strip() for l in match.group(1).splitlines()))
    failures += [l for l in log.splitlines() if l.startswith("fake libcuda:")]
    failures += [f"panic at {p}" for p in other_panics]
    if not lines:
        # The stand-in loaded no module: a real driver (or none) answered instead.
        failures.append("no module went through the stand-in driver")
    if status == "?":
        failures.append("did not finish (still running, or killed)")
    elif status != "0":
        last = [l for l in log.splitlines() if l.startswith("error")]
        failures.append(f"exit {status}: {last[-1] if last else 'see log.txt'}")
    line = (
        f"{folder.parent.name:7} {folder.name:17} exit {status:>3} {seconds:>5} s  "
        f"{len(lines):4} modules  NVRTC+host {compile_s:7.1f} s  ptxas {ptxas_s:6.1f} s  "
        f"probe panics {probe_panics}"
    )
    if slowest:
        parts = slowest.split()
        line += f"\n        slowest: {parts[4]} {parts[-1][:90]}"
    return line, sorted(set(failures))


def main() -> int:
    out = Path(sys.argv[1])
    found = 0
    for folder in sorted(out.glob("sm_*/*")):
        line, failures = job(folder)
        print(line)
        for failure in failures:
            print(f"    FAIL {failure}")
        found += len(failures)
    print(f"{found} distinct failures" if found else "no failures")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
