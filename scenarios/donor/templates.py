"""Prompt text for the donor game: the rules (shared), then the agent's own view, then the question."""

from string import Template

# Shared by every player of a generation, so a batch computes it once (prefix sharing).
RULES = Template(
    "You are playing a donor game with $agents players. Each player starts each game with $endowment units. "
    "Every round each player is paired with another one: one is the donor, the other the recipient, and the "
    "roles alternate from round to round. A donor may give part of its resources; the recipient receives "
    "$multiplier times what was given.$punish Nobody knows how many rounds a game lasts. After two games, the "
    "half of the players with the most resources survive into the next generation and the others are "
    "replaced by newcomers who learn from the survivors. This is generation $generation.$survivors"
)
GOAL = " Your goal is to maximize the number of units you have after the final round."  # Vallinder & Hughes's goal line
PUNISH = Template(" Instead of giving, a donor may pay x units to remove $pm times x units from the recipient.")
SURVIVORS = Template(" The strategies of the players who survived the last generation: $strategies")

# Agent-specific text comes last.
SELF = Template(" You are player $agent.$strategy")
OWN_STRATEGY = Template(" Your strategy: $text")  # (quoted by the model: untrusted text)
ROUND = Template(" It is round $round. You have $resources units. You are the donor and player $recipient, who has "
                 "$recipient_resources units, is the recipient.$trace")
TRACE_GIVE = Template(" Player $actor gave $percent% of its resources ($amount units) to player $to.")
TRACE_PUNISH = Template(" Player $actor paid $amount units to punish player $to.")
TRACE_NONE = Template(" Player $actor has not been a donor yet.")

QUESTIONS = {
    "strategy": Template("Write your strategy for this game in one or two sentences: how much will you give, and to whom?"),
    "action": Template("Do you give to player $recipient or punish player $recipient?"),
    "give": Template("What percent of your resources do you give to player $recipient?"),
    "punish": Template("What percent of your resources do you pay to punish player $recipient?"),
}
