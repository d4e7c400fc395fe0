"""An agent episode's recorded calls -> the token-in/token-out sequences it trains as.

Each sampled completion is a node: its call's prompt ids, then its completion ids. A node
continues an earlier one when its prompt ids start with that node's prompt + completion
ids (by construction when the request repeated that call and its reply, see
`agentrl.agents.recorder`; checked on the ids otherwise). Nodes chain into sequences: a
node joins the sequence its parent ends; it starts a new one when it has no parent (the
agent rewrote its history: ``history_rewrites``) or when its parent was already continued
(another choice of ``n``, or a retry from the same state: ``branches``). A sequence is one
`agentrl.trajectory.Trajectory`: the first prompt, then per call the generated ids
(mask 1, behaviour log-probs) and the ids the next prompt added (mask 0). Every sequence
of an episode gets the episode's reward.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentrl.agents.recorder import CallRecord
from agentrl.trajectory import Trajectory

Node = tuple[int, int]  # (call index, choice index)


@dataclass
class Chain:
    nodes: list[Node] = field(default_factory=list)
    rewrite: bool = False  # started because the agent rewrote its history


@dataclass
class Split:
    chains: list[Chain]
    history_rewrites: int
    branches: int


def _starts_with(ids: Sequence[int], prefix: Sequence[int]) -> bool:
    return len(ids) >= len(prefix) and list(ids[: len(prefix)]) == list(prefix)


def _full(calls: Sequence[CallRecord], node: Node) -> list[int]:
    call = calls[node[0]]
    return call.prompt_ids + call.choices[node[1]].completion_ids


def split_calls(calls: Sequence[CallRecord]) -> Split:
    """The chains of an episode's calls (see the module doc)."""
    chains: list[Chain] = []
    tail_of: dict[Node, int] = {}  # a node that ends chain i
    seen: list[Node] = []
    rewrites = branches = 0
    for call in calls:
        parent: Node | None = call.extends
        if parent is None:
            for node in reversed(seen):
                if _starts_with(call.prompt_ids, _full(calls, node)):
                    parent = node
                    break
        for k in range(len(call.choices)):
            node = (call.index, k)
            if parent is not None and parent in tail_of:
                index = tail_of.pop(parent)
                chains[index].nodes.append(node)
            else:
                sibling = k > 0  # another choice of the same call
                rewrite = parent is None and bool(seen) and not sibling
                rewrites += int(rewrite)
                branches += int(parent is not None or sibling)
                index = len(chains)
                chains.append(Chain([node], rewrite))
            tail_of[node] = index
        seen.extend((call.index, k) for k in range(len(call.choices)))
    return Split(chains, rewrites, branches)


def call_summary(call: CallRecord, choice: int, added: int) -> dict[str, Any]:
    """A call as the dump shows it: its token counts and how its prompt was made."""
    c = call.choices[choice]
    return {
        "call": call.index,
        "choice": choice,
        "prompt_tokens": len(call.prompt_ids),
        "added_tokens": added,
        "completion_tokens": len(c.completion_ids),
        "finish_reason": c.finish_reason,
        "continues": None if call.extends is None else list(call.extends),
        "new_messages": call.new_messages,
        "tool_calls": len(c.message.get("tool_calls") or []),
        "truncated_context": call.truncated,
        "ignored_fields": list(call.ignored),
        "seconds": round(call.seconds, 4),
    }


def _conversation(calls: Sequence[CallRecord], chain: Chain) -> list[dict[str, Any]]:
    """The chain's messages: the first request's, then each reply (the model's text)
    followed by the messages the next request added."""
    first = calls[chain.nodes[0][0]]
    messages = [dict(m) for m in first.messages]
    for n, (ci, k) in enumerate(chain.nodes):
        call = calls[ci]
        if n > 0:
            messages.extend(
                dict(m) for m in call.messages[len(call.messages) - call.new_messages :]
            )
        choice = call.choices[k]
        calls_made = len(choice.message.get("tool_calls") or [])
        messages.append({"role": "assistant", "content": choice.text, "tool_calls": calls_made})
    return messages


def trajectories(
    calls: Sequence[CallRecord],
    *,
    sample: Mapping[str, Any],
    data_index: int,
    seconds: float,
    agent: Mapping[str, Any],
    decode: Any,
) -> tuple[list[Trajectory], Split]:
    """The episode's sequences as trajectories, each carrying the agent record ``agent``
    (reward, logged values) with its own calls and its place among the sequences."""
    split = split_calls(calls)
    out = []
    for s, chain in enumerate(split.chains):
        first = calls[chain.nodes[0][0]]
        prompt = list(first.prompt_ids)
        running = list(prompt)
        ids: list[int] = []
        mask: list[int] = []
        logps: list[float] = []
        versions: list[int] = []
        texts: list[str] = []
        summaries = []
        generated = observed = 0
        for ci, k in chain.nodes:
            call = calls[ci]
            added = call.prompt_ids[len(running) :] if ids else []
            ids += added
            mask += [0] * len(added)
            logps += [0.0] * len(added)
            versions += [-1] * len(added)
            choice = call.choices[k]
            ids += choice.completion_ids
            mask += [1] * len(choice.completion_ids)
            logps += [min(float(x), 0.0) for x in choice.logps]
            versions += [choice.version] * len(choice.completion_ids)
            running = call.prompt_ids + choice.completion_ids
            texts.append(choice.text)
            generated += len(choice.completion_ids)
            observed += len(added)
            summaries.append(call_summary(call, k, len(added)))
        last = calls[chain.nodes[-1][0]].choices[chain.nodes[-1][1]]
        record = {
            **agent,
            "sequence": s,
            "sequences": len(split.chains),
            "history_rewrite": chain.rewrite,
            "calls": summaries,
        }
        traj = Trajectory(
            prompt=decode(prompt),
            messages=[dict(m) for m in first.messages],
            tools=first.tools,
            gt=list(sample.get("gt") or []),
            completion="\n".join(texts),
            context=decode(running),
            prompt_ids=prompt,
            response_ids=ids,
            response_mask=mask,
            response_logps=logps,
            response_versions=versions,
            turn_outputs=texts,
            unfinished=last.finish_reason == "length",
            policy_version=calls[chain.nodes[0][0]].choices[chain.nodes[0][1]].version,
            data_index=data_index,
            rollout_time=seconds,
            stats={
                "turns": float(len(chain.nodes)),
                "generated_tokens": float(generated),
                "observation_tokens": float(observed),
            },
            conversation=_conversation(calls, chain),
            columns={k: v for k, v in sample.items() if k not in ("messages", "tools", "gt")},
        )
        traj.agent = record
        traj.check_alignment()
        out.append(traj)
    return out, split


__all__ = ["Chain", "Split", "call_summary", "split_calls", "trajectories"]
