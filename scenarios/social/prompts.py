"""The community's prompt text: the rules and topic every member shares, then the member's own feed, what its
writing got since its last visit, and its stance; the write and stance questions. The words are in
`scenarios.social.templates`; a member's text is quoted as the run's edition says (scenarios.social.editions)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scenarios.social import templates as tpl

if TYPE_CHECKING:
    from scenarios.social.model import Member, SocialModel


def feed_context(model: "SocialModel", member: "Member", ids: Sequence[int], followed: Sequence[bool]) -> str:
    """Shared rules first, then this member's feed, rewards and view (prefix sharing across the batch)."""
    c, it, idx = model.config, model.items, member.idx
    text = tpl.RULES.substitute(forums=", ".join(f"m/{f}" for f in tpl.FORUMS[: c.forums]), topic=c.topic)
    shown = [tpl.ITEM.substitute(
        k=k + 1, kind="comment" if it.parent[i] >= 0 else "post", author=int(model.uid[it.author[i]]),
        followed=" (you follow)" if followed[k] else "", forum=tpl.FORUMS[it.topic[i]],
        score=int(it.up[i] - it.down[i]), replies=int(it.replies[i]), text=model.edition.shown(it.text[i]))
        for k, i in enumerate(ids)]
    text += tpl.FEED.substitute(items="".join(shown)) if shown else tpl.FEED_EMPTY
    if c.show_reward:
        text += tpl.REWARD.substitute(up=int(model.seen_up[idx]), down=int(model.seen_down[idx]),
                                      replies=int(model.seen_replies[idx]))
    return text + tpl.YOU.substitute(agent=member.unique_id, stance=tpl.stance_words(float(model.opinion[idx])))


def comment_question(model: "SocialModel", k: int, parent: int) -> str:
    """The question of a member writing a comment on item `parent`, the k-th of its feed."""
    it = model.items
    return tpl.WRITE_COMMENT.substitute(k=k, author=int(model.uid[it.author[parent]]), text=model.edition.shown(it.text[parent]))


def stance_context(model: "SocialModel", item: int) -> str:
    """What the stance read-back scores a message in: the topic and the message (no persona)."""
    return tpl.STANCE_CONTEXT.substitute(topic=model.config.topic, text=model.quoted(model.items.text[item]))
