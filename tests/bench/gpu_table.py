"""Prints tests/bench/gpu.sh's results (one JSON object a line) as a Markdown table.

Usage: python3 gpu_table.py results.jsonl
"""
import json
import sys


def main():
    rows = {}
    order = []
    for line in open(sys.argv[1]):
        entry = json.loads(line)
        label = entry["label"]
        cold = " cold" in label
        # "seeded": the cold run had the dry run's compiled CUDA kernels (gpu.sh's EMBER_KERNELS).
        base = label.replace(" cold", "").replace(" seeded", "")
        if base not in rows:
            rows[base] = {}
            order.append(base)
        key = entry["side"] + (" cold" if cold else "")
        rows[base][key] = entry.get("result")
    gib = lambda b: f"{b / 2**30:.2f} GiB" if b else "—"
    ms = lambda s: f"{s * 1e3:.1f} ms" if s is not None else "—"
    # Kernels compiled by the cold and the warm process (SPIR-V keeps them: warm should be 0).
    count = lambda run: (run or {}).get("kernels_compiled")
    compiled = lambda cold, warm: (
        f"({count(cold)} / {count(warm)} kernels compiled) " if count(cold) is not None else ""
    )
    print("| network | ember (wgpu, or [cuda]) | PyTorch (CUDA) | ember / PyTorch | ember first call cold / warm "
          "| PyTorch first call | device memory ember / PyTorch | attention (ember, cold run) |")
    print("|---|---|---|---|---|---|---|---|")
    for base in order:
        r = rows[base]
        ours, cold = r.get("ember"), r.get("ember cold")
        # Ember on CUDA ("… [cuda]") is compared with the same network's PyTorch run.
        torch_row = rows.get(base.replace(" [cuda]", ""), {})
        theirs = torch_row.get("torch")
        ratio = f"**{ours['median_s'] / theirs['median_s']:.2f}**" if ours and theirs else "—"
        attention = sorted({a.split(": ", 1)[1] for a in (cold or {}).get("attention", [])})
        print(
            f"| {base} | {ms(ours['median_s']) if ours else 'failed'} "
            f"| {ms(theirs['median_s']) if theirs else 'failed' if 'torch' in torch_row else '—'} | {ratio} "
            f"| {ms(cold.get('first_call_s')) if cold else '—'} / {ms(ours.get('first_call_s')) if ours else '—'} "
            f"{compiled(cold, ours)}"
            f"| {ms(theirs.get('first_call_s')) if theirs else '—'} "
            f"| {gib(ours.get('peak_device_bytes')) if ours else '—'} / "
            f"{gib(theirs.get('peak_device_bytes')) if theirs else '—'} "
            f"| {', '.join(attention) or '—'} |"
        )


if __name__ == "__main__":
    main()
