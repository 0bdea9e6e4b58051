"""The integrated trainer on the GPU: graph identity, resume identity, and the learning check."""
import pytest

from foxc.bench.edge import run_one
from foxc.trainer.run import Trainer
from test_trainer import SlowLog, check_every_frame_once
from trainer_cases import assert_same_state, config, market, state, trainer

DATA = market(60_000)


def gpu_config(**over):
    base = dict(n_backtests=256, seq_len=16, per_capacity=1024, synthetic_rows=60_000)
    base.update(over)
    return config(**base)


@pytest.mark.parametrize("orders", ["market", "passive"])
def test_graph_replay_equals_eager_on_device(cuda_rt, orders):
    eager = trainer(cuda_rt, gpu_config(graph="off", orders=orders), DATA)
    eager.train(14)
    graphed = trainer(cuda_rt, gpu_config(graph="on", orders=orders), DATA)
    graphed.train(14)
    assert graphed.graph is not None and graphed.graph_step == graphed.capture_after == 1024 // 256 + 3
    assert_same_state(state(eager), state(graphed))
    for t in (eager, graphed):
        t.close()


@pytest.mark.parametrize("orders", ["market", "passive"])
def test_resume_matches_uninterrupted_run_on_device(cuda_rt, tmp_path, orders):
    cfg = gpu_config(graph="on", orders=orders, queue_model="power3", entry_latency_ns=300_000)
    straight = trainer(cuda_rt, cfg, DATA)
    straight.train(16)
    first = trainer(cuda_rt, cfg, DATA, tmp_path)
    first.train(9)  # a graph is captured at step 6 and replayed before the save
    path = first.save()
    resumed = trainer(cuda_rt, cfg, DATA, tmp_path / "b")
    resumed.resume(path)
    resumed.train(7)
    assert_same_state(state(straight), state(resumed))
    for t in (straight, first, resumed):
        t.close()


def test_learning_check_on_device(cuda_rt):
    """The default market at the trainer's GPU defaults (B=1,024, K=32, PER 65,536, graph): after
    20,000 steps the greedy agent earns at least 0.6 of the market's exact optimum on 524,288
    held-out snapshots of another seed (a policy that never trades earns 0)."""
    row = run_one(cuda_rt, "default", 0, 20_000, eval_rows=524_288)
    print(f"learning check (default): {row['opt_frac']:.3f} of the optimum ({row['pnl_ticks']:.5f} ± "
          f"{row['pnl_se']:.5f} ticks per snapshot, optimum {row['optimum']:.5f}), {row['trades']} trades, "
          f"{row['train_sps']} steps/s")
    assert row["opt_frac"] >= 0.6


def test_a_rare_reader_loses_no_frame_on_device(cuda_rt):
    """Graph replays enqueued far ahead of the GPU, a ring of 64 frames read at most every 200 steps:
    back-pressure keeps the host within 32 steps of its reads, every step's frame arrives once,
    and each record's steps/s comes from the device's time stamps."""
    m, labels = DATA
    t = Trainer(cuda_rt, gpu_config(graph="on", log_every=200), m, labels, ring_len=64)
    log = SlowLog(delay=0.05)
    summary = t.train(600, log)
    check_every_frame_once(summary, log.records, 0, 600, 200)
    assert all(100 < r["sps"] < 1e5 for r in log.records), [r["sps"] for r in log.records]
    t.close()


def test_rotating_run_resumes_bit_identically_on_device(cuda_rt, tmp_path):
    """More segments than the budget holds: graph replays between rotations (side-stream refills), the
    cursors only in drawable slots, and a resume from a checkpoint with a refill pending."""
    from test_data_resident import DATA, EVERY, check_cursors_in_drawable_slots, rotating_config
    cfg = rotating_config(graph="on", n_backtests=64, per_capacity=256)
    straight = trainer(cuda_rt, cfg, DATA)
    for _ in range(6 * EVERY + 2):
        straight.step()
        check_cursors_in_drawable_slots(straight)
    assert straight.graph is not None and straight.ts.rotation.rotations == 6
    first = trainer(cuda_rt, cfg, DATA, tmp_path)
    first.train(3 * EVERY + 1)
    path = first.save()
    resumed = trainer(cuda_rt, cfg, DATA, tmp_path / "b")
    assert resumed.resume(path) == 3 * EVERY + 1
    resumed.train(3 * EVERY + 1)
    assert_same_state(state(straight), state(resumed))


@pytest.mark.parametrize("rotating", [False, True], ids=["resident", "rotating"])
def test_training_from_a_cache_on_disk_on_device(cuda_rt, tmp_path, rotating):
    """Rows left on disk, uploaded or staged a shard at a time through mapped memory: the same bits as the
    cache read into memory, on the device."""
    from foxc.data.cache import CacheRows, open_cache
    from foxc.data.labels import LabelConfig
    from test_data_cache_training import BUDGET_GB, EVERY, make_cache, run
    cache = make_cache(tmp_path, 6)
    cfg = config(device_data_gb=BUDGET_GB if rotating else None, rotate_every=EVERY, graph="on")
    loaded = open_cache(cache, LabelConfig())
    on_disk, rotation = run(cuda_rt, cfg, (CacheRows(cache, LabelConfig()), None), 4 * EVERY + 1)
    in_memory, _ = run(cuda_rt, cfg, (loaded.market, loaded.labels), 4 * EVERY + 1)
    assert (rotation is not None) == rotating
    assert_same_state(on_disk, in_memory)
