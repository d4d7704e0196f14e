"""The reproduction's curves.png (`table1.write_table`): each network's validation perplexity by epoch and its
training loss by step."""

from __future__ import annotations

from pipelines import files


def plot_curves(rows: list[dict], path: str) -> None:
    """Validation perplexity per epoch (left) and the training loss over steps (right), one line per network.

    The loss curve shows progress within an epoch, so a one-epoch run still has something to read.
    """
    # deferred: matplotlib loads when this runs, not with the module
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    # deferred: matplotlib loads when this runs, not with the module
    from matplotlib import pyplot as plt

    networks = [r for r in rows if r.get("curve")]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5), dpi=100)
    epochs = max((len(r["curve"]) for r in networks), default=1)
    for r in networks:
        label = f"{r['name']} (n={r['n']}, h={r['h']}, m={r['m']}{', direct' if r['direct'] else ''})"
        (line,) = left.plot(range(1, len(r["curve"]) + 1), r["curve"], marker="o", label=label)
        if r.get("loss_curve"):
            steps, losses = zip(*r["loss_curve"])
            right.plot(steps, losses, color=line.get_color(), label=label)
    left.set_xlim(0.5, epochs + 0.5)
    # Whole epochs only (MaxNLocator falls back to fractions when the range holds a single integer).
    left.xaxis.set_major_locator(matplotlib.ticker.MultipleLocator(max(1, -(-epochs // 10))))
    left.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
    left.set_xlabel("epoch")
    left.set_ylabel("validation perplexity")
    left.set_title("validation perplexity after each epoch")
    right.set_xlabel("training step")
    right.set_ylabel("training loss (mean -ln P per interval)")
    right.set_title("training loss over steps")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    fig.tight_layout()
    files.replace_atomically(path, fig.savefig)
    plt.close(fig)
