"""Text of the social scenario: LLM prompts (shared text first) and the scripted agents' message templates."""

from __future__ import annotations

from string import Template

#: the community's forums ("submolts"); an item belongs to one, agents have interests over them
FORUMS = ("general", "philosophy", "coding", "science", "art", "economics", "news", "memes",
          "gaming", "music", "health", "history", "sports", "travel", "food", "books")

#: stance labels an LLM's message is scored against, and the opinion each stands for
STANCES = ("strongly against", "against", "neutral", "in favour", "strongly in favour")
STANCE_VALUES = (0.0, 0.25, 0.5, 0.75, 1.0)

# ----- LLM prompts: the text every member shares comes first (prefix sharing in a batch) -----
RULES = Template(
    "You are a member of an online community like Reddit, organised in forums ($forums). Members write "
    "posts, comment on posts and comments, upvote or downvote them, and follow or unfollow authors. "
    "The community keeps debating one question: $topic"
)
FEED = Template(" Your feed (most relevant first): $items")
FEED_EMPTY = " Your feed is empty."
# (texts members wrote are quoted by the model: untrusted text)
ITEM = Template(" [$k] $kind by member $author$followed in m/$forum, score $score, $replies replies: $text")
REWARD = Template(" Since your last visit your messages got $up upvotes, $down downvotes and $replies replies.")
YOU = Template(" You are member $agent. Your current view on the question: $stance.")

CHOOSE = ("What do you do now? 'post' writes a new post; 'comment K', 'upvote K', 'downvote K', 'follow K' and "
          "'unfollow K' act on feed item K; 'idle' does nothing.")
WRITE_POST = Template("Write a short new post for m/$forum (one or two sentences) that shows your view on the question.")
WRITE_COMMENT = Template("Write a short reply (one or two sentences) to item [$k] by member $author: $text")
STANCE_CONTEXT = Template("The question debated: $topic Message: $text")
STANCE_QUESTION = "What is the message's stance on the question?"

# ----- scripted messages: a few fixed phrasings, so duplicates and templates arise as on MoltBook -----
OPENERS = ("Hot take:", "Honestly,", "Thinking about it today:", "Unpopular opinion:", "Quick thought:",
           "After reading the feed,", "Hello m/$forum!", "For the record,")
CLAIMS = {
    0: ("this is a terrible idea.", "I am firmly against it.", "we should stop this now."),
    1: ("I have serious doubts.", "I lean against it.", "the risks outweigh the benefits."),
    2: ("I can see both sides.", "I am still undecided.", "it depends on the details."),
    3: ("I think it is mostly good.", "I lean in favour.", "the benefits outweigh the risks."),
    4: ("this is exactly what we need.", "I fully support it.", "we should go all in."),
}
REPLIES = {
    "agree": ("Agreed, well said.", "Exactly my view.", "+1, this.", "Couldn't agree more."),
    "disagree": ("I disagree.", "That's not right.", "Strongly disagree with this.", "Have you considered the other side?"),
}
REASONS = ("Agents learn faster together.", "Humans should stay in the loop.", "Look at what happened last week.",
           "Trust has to be earned.", "The incentives are all wrong.", "Nobody asked the members.",
           "It scales better than people think.", "Mistakes here are hard to undo.", "Open communities win.",
           "Rules written by outsiders rarely work.", "We already do most of it anyway.", "Accountability matters most.")
BROADCAST = Template("Hello m/$forum! Excited to be here. Follow me for daily updates!")


def stance_bucket(opinion: float) -> int:
    """0..4: the five stance buckets of an opinion in [0, 1]."""
    return min(4, max(0, int(opinion * 5)))


def stance_words(opinion: float) -> str:
    """The stance label closest to an opinion."""
    return STANCES[stance_bucket(opinion)]
