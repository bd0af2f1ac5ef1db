"""The pure Raft decisions (``raftlog.consensus.decisions``) driven by the scripts in ``testdata/``, one
script per decision, each a trace of commands and what the decision answered (see ``datadriven.py`` for
the format). A script's state (the replica's term, vote, log, role, what it heard) carries from one command
to the next, as in etcd raft's interaction tests; nothing here runs pysyncobj, a clock or a network.

Commands (``key=value`` arguments; lists are comma-separated; a log position is ``index/term``):

- ``replica id= voters= term= voted= role= leader= commit= quiet= connected= seen= started=``: set the
  replica's state (any of them); prints it.
- ``config election-timeout=MIN..MAX heartbeat-interval= fallback= pre-vote=on|off``: the timings, seconds.
- ``log T1 T2 ...``: the log holds index 1.. with these terms.
- ``commit own= NODE=INDEX...``: a leader counts the match indexes (``own``: what it holds durably).
- ``progress match= next=``: a leader's progress of one follower; ``reply next= success= reset=``: the
  follower's reply to an append.
- ``vote from= term= last=``: a vote request; ``vote-reply from= term=``: a vote a candidate receives.
- ``pre-vote from= term= last= now=``; ``pre-vote-reply from= term=``: the same for pre-votes.
- ``campaign early= transfer= lost=``: the election deadline passed: the step the replica takes.
- ``late now= deadline= ticked= deferred=``: a follower first ticked after its deadline.
- ``election-timeout seed= draws=``: timeouts drawn from a seeded ``random.Random``.
- ``heard NODE=TIME...``: a leader's last-heard times; ``check-quorum now=``; ``stall now= ticked=
  led=``; ``read-quorum now=``.
"""

from __future__ import annotations

import pathlib
import random
from dataclasses import dataclass, field

import pytest
from datadriven import Case, ScriptError, parse, run_script

from raftlog.consensus import decisions
from raftlog.consensus.messages import RequestVote
from raftlog.errors import InvariantViolation

TESTDATA = pathlib.Path(__file__).parent / "testdata"
SCRIPTS = sorted(TESTDATA.glob("*.txt"))


def _number(value: float) -> str:
    return f"{round(value, 6):g}"


def _flag(value: str) -> bool:
    if value not in ("yes", "no", "on", "off"):
        raise ScriptError(f"expected yes/no/on/off, got {value!r}")
    return value in ("yes", "on")


def _optional(value: str) -> str | None:
    return None if value == "none" else value


def _position(value: str) -> tuple[int, int]:
    index, term = value.split("/")
    return int(index), int(term)


@dataclass
class Replica:
    """What the scripts' commands read and change: one replica's view, as RaftCore keeps it."""

    id: str = "n1"
    voters: list[str] = field(default_factory=lambda: ["n1", "n2", "n3"])
    term: int = 0
    voted: str | None = None
    role: str = "follower"
    leader: str | None = None
    commit: int = 0
    quiet: bool = False
    connected: set[str] = field(default_factory=set)
    seen: float = 0.0
    started: float = 0.0  # when the replica was opened
    log: list[int] = field(default_factory=list)  # the term of each index from 1
    granted: set[str] = field(default_factory=set)  # votes (or pre-votes) counted in this round
    asking: int | None = None  # the term pre-votes are asked for
    heard: dict[str, float] = field(default_factory=dict)
    match: int = 0  # a leader's progress of one follower
    next_index: int = 1
    timeout_min_s: float = 1.5
    timeout_max_s: float = 3.0
    heartbeat_interval_s: float = 0.4
    fallback_s: float = 1.5
    pre_vote_enabled: bool = True

    # -- state -------------------------------------------------------------------------------------
    @property
    def last(self) -> tuple[int, int]:
        return len(self.log), (self.log[-1] if self.log else 0)

    def state(self) -> str:
        parts = [f"{self.id} {self.role} in term {self.term}", f"voted {self.voted or 'none'}"]
        parts.append(f"leader {self.leader or 'none'}")
        parts.append(f"commit {self.commit}")
        if self.quiet:
            parts.append("quiet")
        return ", ".join(parts)

    def handle(self, case: Case) -> str:
        method = getattr(self, "do_" + case.name.replace("-", "_"), None)
        if method is None:
            raise ScriptError(f"line {case.line}: unknown command {case.name!r}")
        return str(method(case))

    def do_replica(self, case: Case) -> str:
        a = case.arguments
        self.id = a.get("id", self.id)
        if "voters" in a:
            self.voters = a["voters"].split(",")
        self.term = int(a.get("term", self.term))
        self.voted = _optional(a["voted"]) if "voted" in a else self.voted
        self.role = a.get("role", self.role)
        self.leader = _optional(a["leader"]) if "leader" in a else self.leader
        self.commit = int(a.get("commit", self.commit))
        self.quiet = _flag(a["quiet"]) if "quiet" in a else self.quiet
        if "connected" in a:
            self.connected = set(a["connected"].split(",")) - {""}
        self.seen = float(a.get("seen", self.seen))
        self.started = float(a.get("started", self.started))
        return self.state()

    def do_config(self, case: Case) -> str:
        a = case.arguments
        if "election-timeout" in a:
            low, high = a["election-timeout"].split("..")
            self.timeout_min_s, self.timeout_max_s = float(low), float(high)
        self.heartbeat_interval_s = float(a.get("heartbeat-interval", self.heartbeat_interval_s))
        self.fallback_s = float(a.get("fallback", self.fallback_s))
        if "pre-vote" in a:
            self.pre_vote_enabled = _flag(a["pre-vote"])
        return (
            f"election timeout {_number(self.timeout_min_s)}..{_number(self.timeout_max_s)} s, heartbeat "
            f"{_number(self.heartbeat_interval_s)} s, fallback {_number(self.fallback_s)} s, pre-vote "
            f"{'on' if self.pre_vote_enabled else 'off'}"
        )

    def do_log(self, case: Case) -> str:
        self.log = [int(term) for term in case.positional]
        index, term = self.last
        return f"last index {index}, term {term}"

    # -- commit ------------------------------------------------------------------------------------
    def do_commit(self, case: Case) -> str:
        others = [int(case.arguments.get(node, "0")) for node in self.voters if node != self.id]
        before = self.commit
        try:
            self.commit = decisions.commit_index(
                before,
                current_term=self.term,
                own_index=int(case.argument("own")),
                match_indexes=others,
                last_index=len(self.log),
                term_at=lambda index: self.log[index - 1] if 0 < index <= len(self.log) else None,
            )
        except InvariantViolation as error:
            return f"invariant violated: {error}"
        return f"commit {before} -> {self.commit}" if self.commit != before else f"commit stays {before}"

    # -- a follower's progress --------------------------------------------------------------------
    def do_progress(self, case: Case) -> str:
        self.match = int(case.arguments.get("match", self.match))
        self.next_index = int(case.arguments.get("next", self.next_index))
        return f"match {self.match}, next {self.next_index}"

    def do_reply(self, case: Case) -> str:
        self.match, self.next_index = decisions.progress(
            self.match,
            self.next_index,
            reply_next_index=int(case.argument("next")),
            success=_flag(case.argument("success")),
            reset=_flag(case.arguments.get("reset", "no")),
        )
        return f"match {self.match}, next {self.next_index}"

    # -- votes -------------------------------------------------------------------------------------
    def _request(self, case: Case, pre: bool = False) -> RequestVote:
        index, term = _position(case.argument("last"))
        return decisions.request_vote(int(case.argument("term")), index, term, pre)

    def do_vote(self, case: Case) -> str:
        candidate = case.argument("from")
        answer = decisions.vote(
            self._request(case),
            candidate,
            current_term=self.term,
            leading=self.role == "leader",
            voted_for=self.voted,
            own_last_term=self.last[1],
            own_last_index=self.last[0],
        )
        out = []
        if answer.step_down:
            self.role, self.leader = "follower", None
            out.append("step down to follower")
        if answer.persist is not None:
            self.term, self.voted = answer.persist
            out.append(f"persist term {self.term}, vote {self.voted or 'none'}")
        if answer.reply is not None:
            out.append("restart election timer")
            out.append(f"send {candidate}: {_message(answer.reply)}")
        return "\n".join(out) or "no reply, nothing persisted"

    def do_vote_reply(self, case: Case) -> str:
        node = case.argument("from")
        counts = decisions.vote_counts(
            self.role == "candidate", int(case.argument("term")), self.term, node in self.voters
        )
        return self._tally(node, counts, "leader")

    def _tally(self, node: str, counts: bool, winner: str) -> str:
        if not counts:
            return "not counted"
        self.granted.add(node)
        count = 1 + len(self.granted)
        won = decisions.majority(count, len(self.voters))
        if won and winner == "leader":
            self.role, self.leader = "leader", self.id
        result = f"{winner}" if won else "no majority yet"
        return f"counted: {count} of {len(self.voters)}: {result}"

    # -- pre-vote ----------------------------------------------------------------------------------
    def do_pre_vote(self, case: Case) -> str:
        node = case.argument("from")
        request = self._request(case, pre=True)
        now = float(case.argument("now"))
        leased = decisions.in_lease(
            now,
            leading=self.role == "leader",
            leader_known=self.leader is not None,
            quiet=self.quiet,
            leader_connected=self.leader in self.connected,
            leader_seen_at=self.seen,
            started_at=self.started,
            election_timeout_min_s=self.timeout_min_s,
        )
        answer = decisions.pre_vote(
            request["term"],
            self.term,
            leased=leased,
            leading=self.role == "leader",
            quiet=self.quiet,
            up_to_date=decisions.log_up_to_date(
                request["last_log_term"], request["last_log_index"], self.last[1], self.last[0]
            ),
        )
        if answer == "grant":
            return f"grant: send {node}: response_vote term {request['term']} pre"
        if answer == "wake_leader":
            self.quiet, self.seen = False, now
            return f"wake_leader: send {self.leader}: wake term {self.term}"
        return answer

    def do_pre_vote_reply(self, case: Case) -> str:
        node = case.argument("from")
        counts = decisions.pre_vote_counts(
            leading=self.role == "leader",
            asking_term=self.asking,
            reply_term=int(case.argument("term")),
            current_term=self.term,
            from_voter=node in self.voters,
        )
        return self._tally(node, counts, "pre-vote won")

    # -- elections ---------------------------------------------------------------------------------
    def do_campaign(self, case: Case) -> str:
        pre_vote_won = self.asking == self.term + 1 and decisions.majority(
            1 + len(self.granted), len(self.voters)
        )
        step = decisions.campaign(
            voting=self.id in self.voters,
            pre_vote_enabled=self.pre_vote_enabled,
            pre_vote_won=pre_vote_won,
            early_campaigns=int(case.arguments.get("early", "0")),
            transfer=_flag(case.arguments.get("transfer", "no")),
            leader_lost=_optional(case.arguments.get("lost", "none")),
            asked_this_term=self.term > 0 and self.role == "candidate" and self.voted == self.id,
            heartbeat_interval_s=self.heartbeat_interval_s,
        )
        index, last_term = self.last
        if step.step == "wait":
            self.asking = None
            return "wait (not a voter)"
        if step.step == "pre_vote":
            self.asking, self.granted, self.leader = self.term + 1, set(), None
            message = decisions.request_vote(self.asking, index, last_term, pre=True)
            return f"pre_vote: send {','.join(self._others())}: {_message(message)}"
        self.asking = None
        if step.step == "elect":
            self.role, self.leader, self.term, self.voted, self.granted = (
                "candidate",
                None,
                self.term + 1,
                self.id,
                set(),
            )
            out = [f"elect: persist term {self.term}, vote {self.id}"]
        else:
            out = [f"ask_again in term {self.term}"]
        if self._others():
            request = decisions.request_vote(self.term, index, last_term)
            out.append(f"send {','.join(self._others())}: {_message(request)}")
        timer = "random election timeout" if step.retry_s is None else f"{_number(step.retry_s)} s"
        out.append(
            f"cause {step.cause}, early campaigns left {step.early_campaigns}, next deadline in {timer}"
        )
        if step.step == "elect" and decisions.majority(1, len(self.voters)):
            self.role, self.leader = "leader", self.id
            out.append("leader (a group of one)")
        return "\n".join(out)

    def _others(self) -> list[str]:
        return [node for node in self.voters if node != self.id]

    def do_late(self, case: Case) -> str:
        deferred = _optional(case.arguments.get("deferred", "none"))
        ticked = _optional(case.arguments.get("ticked", "none"))
        new = decisions.late_deadline(
            float(case.argument("now")),
            float(case.argument("deadline")),
            ticked_at=None if ticked is None else float(ticked),
            deferred_deadline=None if deferred is None else float(deferred),
            tolerance_s=0.1,
            heartbeat_interval_s=self.heartbeat_interval_s,
        )
        return "deadline stands" if new is None else f"put off to {_number(new)}"

    def do_election_timeout(self, case: Case) -> str:
        rng = random.Random(int(case.argument("seed")))
        draws = [
            decisions.election_timeout_s(self.timeout_min_s, self.timeout_max_s, rng)
            for _ in range(int(case.argument("draws")))
        ]
        inside = all(self.timeout_min_s <= draw < self.timeout_max_s for draw in draws)
        return f"{' '.join(f'{draw:.3f}' for draw in draws)}\nall within the range: {inside}"

    # -- check-quorum and reads --------------------------------------------------------------------
    def do_heard(self, case: Case) -> str:
        self.heard = {node: float(at) for node, at in case.arguments.items()}
        return ", ".join(f"{node} at {_number(at)}" for node, at in sorted(self.heard.items()))

    def do_check_quorum(self, case: Case) -> str:
        now = float(case.argument("now"))
        others = self._others()
        kept = decisions.has_quorum(
            now, [self.heard.get(node, 0) for node in others], len(self.voters), self.fallback_s
        )
        recent = [self.id] + [node for node in others if self.heard.get(node, 0) > now - self.fallback_s]
        if not kept:
            self.role, self.leader = "follower", None
        verdict = "keeps leading" if kept else "steps down (check_quorum)"
        return (
            f"heard within {_number(self.fallback_s)} s: {','.join(recent)} of {len(self.voters)}: {verdict}"
        )

    def do_stall(self, case: Case) -> str:
        now = float(case.argument("now"))
        stall = decisions.stall_s(
            now,
            float(case.argument("ticked")),
            led_when_ticked=_flag(case.arguments.get("led", "yes")),
            leading=self.role == "leader",
            heartbeat_interval_s=self.heartbeat_interval_s,
        )
        if stall <= 0:
            return "no stall"
        self.heard = decisions.credit_stall(self.heard, now, stall)
        credited = ", ".join(f"{node} at {_number(at)}" for node, at in sorted(self.heard.items()))
        return f"stall {_number(stall)} s credited: {credited}"

    def do_read_quorum(self, case: Case) -> str:
        now = float(case.argument("now"))
        at = decisions.quorum_heard_at(now, [self.heard.get(node, float("-inf")) for node in self._others()])
        return f"a majority heard at {_number(at)}"


def _message(message: object) -> str:
    assert isinstance(message, dict)
    fields = " ".join(f"{key} {value}" for key, value in message.items() if key not in ("type", "pre"))
    return f"{message['type']} {fields}" + (" pre" if message.get("pre") else "")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_script(script: pathlib.Path) -> None:
    run_script(script, Replica().handle)


def test_there_is_a_script_per_decision() -> None:
    assert {path.stem for path in SCRIPTS} >= {
        "commit",
        "progress",
        "vote",
        "pre_vote",
        "election",
        "check_quorum",
    }


WRONG = """\
log 1 1 2
----
last index 3, term 2

replica id=n1 role=leader term=3
----
n1 leader in term 3, voted none, leader none, commit 0

# wrong: the entry at 3 is of term 2, an earlier term: counting commits nothing
commit own=3 n2=3
----
commit 0 -> 3
"""


def test_a_wrong_expectation_fails_naming_the_case(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAFTLOG_REWRITE_SCRIPTS", raising=False)
    script = tmp_path / "wrong.txt"
    script.write_text(WRONG, encoding="utf-8")
    with pytest.raises(AssertionError) as failure:
        run_script(script, Replica().handle)
    message = str(failure.value)
    assert "wrong.txt:10: commit own=3 n2=3" in message
    assert "--- expected\ncommit 0 -> 3\n--- got\ncommit stays 0" in message
    assert script.read_text(encoding="utf-8") == WRONG, "a failing run changed the script"


def test_rewriting_writes_the_actual_trace(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAFTLOG_REWRITE_SCRIPTS", "1")
    script = tmp_path / "wrong.txt"
    script.write_text(WRONG, encoding="utf-8")
    run_script(script, Replica().handle)
    assert script.read_text(encoding="utf-8") == WRONG.replace("commit 0 -> 3", "commit stays 0")
    monkeypatch.delenv("RAFTLOG_REWRITE_SCRIPTS")
    run_script(script, Replica().handle)  # now it passes


def test_a_script_that_cannot_be_read_is_an_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ScriptError, match="not followed by"):
        parse("commit own=3\ncommit stays 0\n")
    script = tmp_path / "unknown.txt"
    script.write_text("propose x\n----\nok\n", encoding="utf-8")
    with pytest.raises(ScriptError, match="unknown command 'propose'"):
        run_script(script, Replica().handle)
