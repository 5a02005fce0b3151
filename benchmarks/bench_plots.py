"""How long the stream Gantt takes from a real run's op_summary of many tasks to a PNG, and whether
every Task Type with a real share of the time still shows in it (target 7: "still readable")."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
from harness import Result, median_time  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from workloads import resnet_run  # noqa: E402

import geprof_nb  # noqa: E402
from geprof_nb.nb.plots import color_of, figure_png, task_gantt  # noqa: E402

#: A Task Type with at least this share of the tasks' time must be painted somewhere to pass.
MIN_SHARE_SHOWN = 0.05


def resnet_op_summary(n: int):
    """The first ``n`` rows of a ResNet-50 training run's op_summary (all layers on): real Task Types in
    the shares and order a real run has them (AI_VECTOR_CORE and AI_CORE interleaved on one stream,
    communication on its own row), which a table of random types cannot show."""
    rows = geprof_nb.load(resnet_run(int(n / 0.97) + 1)).op_summary  # ~97% of task records are op tasks
    if len(rows) < n:
        raise RuntimeError(f"the ResNet-50 run has {len(rows):,} op rows, fewer than the {n:,} asked for")
    return rows.head(n)


def readability(fig, op_summary) -> dict:
    """Per Task Type: its share of the tasks' time, its share of the ink on the Gantt's axes (Agg canvas;
    each pixel goes to the nearest type colour, with the coverage that blends it with the white
    background, so a column a task fills a third of counts a third), and the pixels that show it
    (nearer its colour than to white or another type's); and the types with at least
    :data:`MIN_SHARE_SHOWN` of the time that no pixel shows."""
    time = op_summary.groupby("Task Type", observed=True)["Task Duration(us)"].sum()
    kinds = [str(k) for k in time.index]
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    image = np.asarray(canvas.buffer_rgba())[..., :3] / 255.0
    box = fig.axes[0].get_window_extent()
    image = image[image.shape[0] - int(box.y1) + 1:image.shape[0] - int(box.y0) - 1, int(box.x0) + 1:int(box.x1) - 1]
    ink = 1.0 - image.reshape(-1, 3)  # distance from the white background
    colors = 1.0 - np.array([to_rgb(color_of(k)) for k in kinds])
    # coverage of each colour that best explains each pixel (a blend of it and white), and its error
    cover = np.clip(ink @ colors.T / (colors ** 2).sum(axis=1), 0.0, 1.0)
    error = ((ink[:, None, :] - cover[:, :, None] * colors) ** 2).sum(axis=-1)
    nearest = error.argmin(axis=1)
    coverage = cover[np.arange(len(ink)), nearest]
    shown = np.bincount(nearest[coverage > 0.5], minlength=len(kinds))
    painted = np.bincount(nearest, weights=coverage, minlength=len(kinds))
    time_share = dict(zip(kinds, np.round(time.to_numpy() / time.sum(), 3).tolist()))
    return {"time_share": time_share,
            "painted_share": dict(zip(kinds, np.round(painted / max(painted.sum(), 1e-9), 3).tolist())),
            "pixels_shown": dict(zip(kinds, shown.tolist())),
            "unpainted_over_5pct": [k for k, n in zip(kinds, shown) if n == 0 and time_share[k] >= MIN_SHARE_SHOWN]}


def _gantt_png(n: int, target_s: float) -> Result:
    frame = resnet_op_summary(n)
    sizes: dict[str, int] = {}

    def run() -> None:
        sizes["png_bytes"] = len(figure_png(task_gantt(frame)))

    seconds = median_time(run, runs=5)
    check = readability(task_gantt(frame), frame)
    fast = seconds <= target_s
    return Result(f"task_gantt {n:,} ResNet-50 tasks -> PNG, every Task Type >= 5% of the time painted", seconds,
                  "s", f"<= {target_s}", fast and not check["unpainted_over_5pct"],
                  {"tasks": n, "streams": int(frame["Stream ID"].nunique(dropna=False)), "width_px": 1100,
                   "within_time_target": fast, **check, **sizes})


def gantt_100k(quick: bool) -> Result:
    """task_gantt + figure_png of 100,000 tasks (target: <= 0.3 s)."""
    return _gantt_png(100_000, 0.3)


def gantt_1m(quick: bool) -> Result:
    """task_gantt + figure_png of 1,000,000 tasks (target: <= 1.5 s)."""
    return _gantt_png(1_000_000, 1.5)


BENCHMARKS = [gantt_100k, gantt_1m]
