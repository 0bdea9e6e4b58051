"""The cursors component on the reference backend: cursor_advance against a naive loop, the valid starts,
the draws' coverage, reset and placement, graphs."""
import numpy as np
import pytest

from foxc.data import cursors as C
from foxc.data.cursors import Cursors, draw_table, valid_starts
from foxc.data.record import segment_runs
from foxc.rng import seed_states, xorshift32
from kernel_check import poisoned, run_kernel

# rows 0..9 segment 0, 10 segment 1 (one row: never a start), 11..13 segment 2, 14..39 segment 3
SEGMENT = np.r_[np.zeros(10), [1], np.full(3, 2), np.full(26, 3)].astype(np.uint32)


def naive_starts(segment, history):
    """Rows with `history` earlier rows of their segment and at least one after, by counting."""
    out = []
    for r in range(len(segment)):
        before = sum(1 for q in range(r) if segment[q] == segment[r] and all(segment[q:r + 1] == segment[r]))
        after = r + 1 < len(segment) and segment[r + 1] == segment[r]
        if before >= history and after:
            out.append(r)
    return out


def naive_advance(cursor, end, state, starts, seg_last, episode_len):
    """One backtest, one advance: (cursor, episode_end, state) after it, with Python integers."""
    if 0 <= cursor < end:
        return cursor + 1, end, state
    x = int(xorshift32(np.array([state], np.uint32))[0])
    i = (x * len(starts)) >> 32
    start, last = int(starts[i]), int(seg_last[i])
    return start, min(last, start + episode_len - 1) if episode_len > 0 else last, x


@pytest.mark.parametrize("history", [0, 1, 3, 12])
def test_valid_starts_leave_the_history_and_a_step(history):
    starts, last = valid_starts(SEGMENT, history)
    assert starts.tolist() == naive_starts(SEGMENT, history)
    for s, l in zip(starts, last):
        assert SEGMENT[l] == SEGMENT[s] and (l + 1 == len(SEGMENT) or SEGMENT[l + 1] != SEGMENT[s])


@pytest.mark.parametrize("episode_len", [0, 1, 4, 100])
def test_cursor_advance_matches_naive_loop(ref_rt, rng, episode_len):
    B = 3000
    starts, seg_last = valid_starts(SEGMENT, 2)
    cursor = rng.integers(-1, 40, B).astype(np.int64)
    end = np.where(rng.random(B) < 0.5, cursor, np.minimum(cursor + rng.integers(0, 5, B), 39)).astype(np.int64)
    end[cursor < 0] = poisoned(int((cursor < 0).sum()), np.int64)  # unset: its end is never read
    state = seed_states(int(rng.integers(1 << 30)), B, "data")
    table = draw_table(*segment_runs(SEGMENT), 2, capacity=6)  # padded: only the counted spans are read
    got = run_kernel(ref_rt, C.CURSOR_ADVANCE, C.grid(B), C.BLOCK, [cursor, end, state, table, episode_len, B])
    for b in range(B):
        want = naive_advance(int(cursor[b]), int(end[b]), int(state[b]), starts, seg_last, episode_len)
        assert (int(got[0][b]), int(got[1][b]), int(got[2][b])) == want, b
    assert got[3].tobytes() == table.tobytes()


@pytest.mark.parametrize("history", [0, 1, 3, 12])
def test_draw_table_enumerates_the_valid_starts(history):
    """Start i of the table (span by span) is valid_starts' i-th, with its segment's last row."""
    table = draw_table(*segment_runs(SEGMENT), history)
    starts, seg_last = valid_starts(SEGMENT, history)
    n_spans, spans = int(table[0]), table[2:].reshape(-1, 3)
    assert table[1] == len(starts)
    got, last, before = [], [], 0
    for end, first, lst in spans[:n_spans]:
        got += range(first, first + end - before)
        last += [lst] * int(end - before)
        before = end
    assert got == starts.tolist() and last == seg_last.tolist()


def test_draw_from_limits_new_episodes_to_the_segments_given(ref_rt):
    first, last = segment_runs(SEGMENT)
    with Cursors(ref_rt, SEGMENT, 5000, history=1, episode_len=3, seed=2) as cur:
        cur.draw_from(first[[0, 2]], last[[0, 2]])  # segments 0 and 2 only
        for _ in range(6):
            cur.advance()
        rows = cur.cursor.download()
        assert set(rows.tolist()) <= set(range(0, 10)) | set(range(11, 14))
        with pytest.raises(ValueError, match="no segment holds 3 snapshots"):
            cur.draw_from(first[[1]], last[[1]])
        with pytest.raises(ValueError, match="exceed the draw table"):
            cur.draw_from(*segment_runs(np.repeat(np.arange(10), 5)))


def test_evict_ends_the_episodes_in_a_range_of_rows(ref_rt):
    with Cursors(ref_rt, SEGMENT, 4, seed=1) as cur:
        cur.place([2, 12, 13, 20], [9, 13, 13, 39])
        cur.evict(11, 14)
        np.testing.assert_array_equal(cur.episode_end.download(), [9, 12, 13, 39])
        np.testing.assert_array_equal(cur.cursor.download(), [2, 12, 13, 20])


def test_draws_cover_the_valid_starts_uniformly(ref_rt):
    B = 40_000
    with Cursors(ref_rt, SEGMENT, B, history=2, episode_len=5, seed=3) as cur:
        drawn, ends = cur.cursor.download(), cur.episode_end.download()
    starts, seg_last = valid_starts(SEGMENT, 2)
    counts = np.array([(drawn == s).sum() for s in starts])
    assert counts.sum() == B and set(np.unique(drawn)) == set(starts.tolist())
    expected = B / len(starts)
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))
    i = np.searchsorted(starts, drawn)
    np.testing.assert_array_equal(ends, np.minimum(seg_last[i], drawn + 4))


def test_reset_draws_from_the_seeded_states(ref_rt):
    starts, seg_last = valid_starts(SEGMENT, 0)
    with Cursors(ref_rt, SEGMENT, 64, seed=0, stream="episodes") as cur:
        cur.reset(11)
        x = xorshift32(seed_states(11, 64, "episodes"))
        i = (x.astype(np.uint64) * np.uint64(len(starts))) >> np.uint64(32)
        np.testing.assert_array_equal(cur.cursor.download(), starts[i])
        np.testing.assert_array_equal(cur.episode_end.download(), seg_last[i])
        np.testing.assert_array_equal(cur.rng.download(), x)


def test_placed_cursors_walk_to_their_end_then_draw(ref_rt):
    with Cursors(ref_rt, SEGMENT, 2, history=0, seed=1) as cur:
        cur.place([0, 20], [3, 20])
        state = cur.rng.download()
        walked = []
        for step in range(4):
            walked.append(int(cur.cursor.download()[0]))
            cur.advance()
            if step == 0:  # backtest 1 was at its episode's end: it drew; backtest 0 walks on
                after = cur.rng.download()
                assert after[0] == state[0] and after[1] == xorshift32(state[1:])[0]
        assert walked == [0, 1, 2, 3]
        assert cur.rng.download()[0] == xorshift32(state[:1])[0]  # drew after row 3, its episode's end
        with pytest.raises(ValueError, match=r"\[2\] rows"):
            cur.place([0], [3])


def test_graph_replay_equals_eager(ref_rt):
    a = Cursors(ref_rt, SEGMENT, 300, history=1, episode_len=7, seed=5)
    b = Cursors(ref_rt, SEGMENT, 300, history=1, episode_len=7, seed=5)
    with ref_rt.capture(name="cursors") as cap:
        b.advance(ref_rt.stream)
    for _ in range(30):
        a.advance()
        cap.graph.launch(ref_rt.stream)
    for x, y in zip(a.buffers(), b.buffers()):
        assert x.download().tobytes() == y.download().tobytes(), x.name


def test_bad_arguments(ref_rt):
    with pytest.raises(ValueError, match="no segment holds 27 snapshots"):
        Cursors(ref_rt, SEGMENT, 4, history=25)
    with pytest.raises(ValueError, match="episode_len"):
        Cursors(ref_rt, SEGMENT, 4, episode_len=-1)
