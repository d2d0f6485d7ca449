"""Decision contracts as named profiles: what, beside a spec's own fields, decides a run's decisions.

A stored run must replay with the random streams and the prompt text it was made with (its scripted
draws and its LLM cache keys depend on both), so every `RunSpec` names the version of the decision
contract it was made under (`RunSpec.contract`). New runs are made under `CONTRACT`. A change that
would alter the decisions (or the stored metrics) of an existing spec adds a profile (and bumps
`CONTRACT`); the old ones stay, so stored runs replay.

A profile holds the switches of the platform's own pieces (the random streams, the spec's digest, memory
sizes, quoting, the built-in LLM prompt, Perolat's metrics, reward vectors, a served model's cache key), each read
once where the piece is chosen: `SocietyModel.__init__`, `agents.llm.prompts.builtin_template`, `SeedStream`,
`RunSpec.digest`, `agents.llm.factory.make_llm_backend`.
What a scenario changed between contracts is not a switch here: the scenario keeps its old pieces frozen and
picks them from its table of editions (sim.tick.editions), so no rule of a scenario asks which contract it runs
under. The versions' history is in docs/architecture.md ("Decision contracts").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DecisionProfile:
    """The switches one version of the decision contract sets."""

    version: int
    #: the random streams (sim.core.rng): 1 = blake2b per request and Mersenne Twister strategy draws,
    #: 2 = counter-based seeds and `CounterRandom` draws
    rng: int
    #: a spec's digest covers its `contract` field (version 1 specs were hashed before the field existed)
    digest_names_contract: bool
    #: agent memories take the config's `memory_window` and `memory_summary_chars` (else Memory's
    #: defaults, 8 items and 400 characters)
    configured_memory: bool
    #: the built-in LLM prompt asks for a Number in one sentence after the question ("Answer with a
    #: number from 0 to 68 in steps of 1.") and lists memory items without a header line
    compact_prompt: bool
    #: text an agent or a data file wrote (messages, posts, names, descriptions, requests, strategies) enters
    #: prompts only through `sim.core.text.quote`: one line, between quotes it cannot close, role markers defused
    quoted_text: bool = False
    #: memory lines name the scenario's own unit of time ("round 3", "tick 3"), not "month" in every scenario
    tick_noun: bool = False
    #: the metric definitions: 1 = as first written; 2 = as corrected against the papers (issue 24): Perolat's four
    #: over material payoffs, not shaped rewards (the scenarios' own corrections are in their editions: the fishery's
    #: proposal, over-usage and efficiency; the market's welfare ratio and baselines; the community's opinion
    #: clusters; docs/metrics.md lists every change)
    metrics: int = 1
    #: each agent step stores its reward vector (named components, sim.reward.components), and the reward is the
    #: config's `reward_weights` over them (default: the payoff, as before)
    reward_components: bool = False
    #: a served model's cache key names its `llm.args` (top_p, max_tokens, seed...: they change its answers; before,
    #: two runs differing only there were answered from one cache)
    served_args_keyed: bool = False


PROFILES: dict[int, DecisionProfile] = {
    1: DecisionProfile(1, rng=1, digest_names_contract=False, configured_memory=False, compact_prompt=False),
    2: DecisionProfile(2, rng=2, digest_names_contract=True, configured_memory=False, compact_prompt=False),
    3: DecisionProfile(3, rng=2, digest_names_contract=True, configured_memory=True, compact_prompt=False),
    4: DecisionProfile(4, rng=2, digest_names_contract=True, configured_memory=True, compact_prompt=True),
    5: DecisionProfile(5, rng=2, digest_names_contract=True, configured_memory=True, compact_prompt=True, quoted_text=True,
                       tick_noun=True),
    6: DecisionProfile(6, rng=2, digest_names_contract=True, configured_memory=True, compact_prompt=True, quoted_text=True,
                       tick_noun=True, metrics=2),
    7: DecisionProfile(7, rng=2, digest_names_contract=True, configured_memory=True, compact_prompt=True, quoted_text=True,
                       tick_noun=True, metrics=2, reward_components=True),
    # (issue 36: the paper protocols word for word, corrected readings and MoltBook figures; issue 41: the grid
    # games store waste and beams; the platform's own switches are those of 7: what changed is in the scenarios' editions)
    8: DecisionProfile(8, rng=2, digest_names_contract=True, configured_memory=True, compact_prompt=True, quoted_text=True,
                       tick_noun=True, metrics=2, reward_components=True),
    # (the embedded engine's answers no longer depend on the other requests of its call: every forward runs whole
    # blocks of rows and lays each row's keys out the same way, agents.llm.local.hf_engine. The switches are 8's and
    # the cache keys unchanged, so runs of 1-8 replay from their caches; re-run live, their sampled texts (now and
    # then a Number or Choice) differ from what they stored, as their float sums are rounded otherwise.)
    9: DecisionProfile(9, rng=2, digest_names_contract=True, configured_memory=True, compact_prompt=True, quoted_text=True,
                       tick_noun=True, metrics=2, reward_components=True),
    # (a served model's cache key names its llm.args; nothing else changes)
    10: DecisionProfile(10, rng=2, digest_names_contract=True, configured_memory=True, compact_prompt=True, quoted_text=True,
                        tick_noun=True, metrics=2, reward_components=True, served_args_keyed=True),
}
VERSIONS = tuple(PROFILES)
#: the decision contract new runs are made under
CONTRACT = max(PROFILES)


def profile(version: int) -> DecisionProfile:
    """The profile of decision contract `version`; ValueError naming the known versions otherwise."""
    try:
        return PROFILES[version]
    except (KeyError, TypeError):
        raise ValueError(f"unknown decision contract {version!r}; known: {', '.join(map(str, VERSIONS))}") from None
