"""Prompt text for the fishery: the situation and the question of each phase."""

from string import Template

# The text shared by every fisher (SITUATION) is the request's context; the fisher's own part
# (OWN_SITUATION) is its own_context, which the prompt renderer puts after the persona (prefix sharing).
SITUATION = Template(
    "You are one of $fishers fishers sharing a lake. After fishing, the remaining fish multiply by "
    "$regrowth, up to the lake's capacity of $capacity tons.$collapse Each ton you catch earns you 1. "
    "$month The lake holds $stock tons of fish.$norm$last$messages"
)
# what the situation discloses (GovSim's prompt tells neither the collapse threshold nor the horizon)
COLLAPSE = Template(" If fewer than $collapse tons remain after fishing, the lake collapses and nobody earns anything more.")
MONTH_OF = Template("It is month $month of $months.")
MONTH = Template("It is month $month.")
OWN_SITUATION = Template("You are fisher $agent.$own")
LAST = Template(" Last month the fishers caught $total tons in all ($mean tons each on average).")
OWN = Template(" Last month you caught $own tons.")
NORM = Template(" The group's agreed limit is $norm tons per fisher.")
MESSAGES = Template(" Messages this month: $messages")
HISTORY = Template("\nWhat everyone saw:\n$history")  # the shared history (scenarios.commons.history)
PROPOSALS = Template(" The fishers proposed these catch limits per fisher: $options.")
BELIEF = Template(" You believe the limit should be $belief tons per fisher.")

QUESTIONS = {
    "talk": Template("Write one short message to the other fishers about how much each of you should catch this month."),
    "propose": Template("Propose a catch limit: how many tons at most should each fisher catch per month?"),
    "vote": Template("Which catch limit do you vote for? The limit with a majority of the votes becomes the group's rule."),
    "harvest": Template("How many tons of fish do you catch this month?"),
    "converse": Template("You are at the restaurant with the other fishers after this month's fishing. What do you say to them "
                         "about how much each of you should catch next month? One or two sentences."),
    "reflect": Template("At home after the conversation: what high-level insight do you draw from this month? One sentence."),
    "sanction": Template("Some fishers caught more than the agreed limit. You may pay $cost to fine one of them $fine. Whom do you fine?"),
}
