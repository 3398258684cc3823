"""The health poll schedule: fast at first, backing off to health.interval_s, fast again when
the answer changes or the head announces its server. Pure: the clock is passed in."""

from inkctl.execute.supervise.health import BACKOFF, FAST_FOR_S, FAST_POLL_S, PollSchedule, announces_server


def delays(s: PollSchedule, start: float, answers: list[str]) -> list[float]:
    now, out = start, []
    for a in answers:
        d = s.after(a, now)
        out.append(d)
        now += d
    return out


def test_fast_at_first_then_backing_off_to_the_interval():
    s = PollSchedule(2.0, now=0.0)
    ds = delays(s, 0.0, ["connection refused"] * 1000)
    fast = [d for d in ds if d == FAST_POLL_S]
    assert len(fast) >= int(FAST_FOR_S / FAST_POLL_S) - 1  # every FAST_POLL_S during the fast phase
    slow = ds[len(fast):]
    assert slow[0] == FAST_POLL_S * BACKOFF
    assert all(b == min(2.0, a * BACKOFF) for a, b in zip(slow, slow[1:]))
    assert ds[-1] == 2.0  # capped at interval_s, never beyond


def test_a_changed_answer_brings_fast_polling_back():
    s = PollSchedule(2.0, now=0.0)
    ds = delays(s, 0.0, ["connection refused"] * 1000)
    assert ds[-1] == 2.0
    now = sum(ds)
    assert s.after("503", now) == FAST_POLL_S  # the port opened: the answer is near
    assert s.after("503", now + FAST_POLL_S) == FAST_POLL_S


def test_hurry_from_the_log_and_a_short_interval():
    s = PollSchedule(2.0, now=0.0)
    delays(s, 0.0, ["connection refused"] * 1000)
    s.hurry(100.0)
    assert s.after("connection refused", 100.0) == FAST_POLL_S
    assert PollSchedule(0.01, now=0.0).after("x", 5.0) == 0.01  # an interval below the fast poll wins


def test_server_announcements_from_engine_logs():
    assert announces_server("INFO:     Application startup complete.")
    assert announces_server("(APIServer pid=1) INFO 12-01 15:50:01 [api_server.py:1880] Starting vLLM API server 0 on http://0.0.0.0:8000")
    assert announces_server("[2026-12-01 15:50:01] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)")
    assert not announces_server("Loading safetensors checkpoint shards:  50% Completed | 2/4")
