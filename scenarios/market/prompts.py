"""The market's prompt text: what a customer's assistant and a business's agent are told, from the model's state.

The words are in `scenarios.market.templates`; the rules every agent of a side shares come first (the local
engine forwards them once per batch), the agent's own request, listings, proposals and inquiries after them.
Text a data file or an agent wrote (names, descriptions, requests, messages) goes through the model's `quoted`
and `named` and the run's edition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from scenarios.market import templates as tpl
from scenarios.market.participants import Inquiry, Proposal, Seller, Shopper
from sim.core.text import one_line

if TYPE_CHECKING:
    from scenarios.market.model import MarketModel

MAX_INQUIRIES_SHOWN = 6  # inquiries quoted in one business prompt
MAX_MENU_SHOWN = 40  # menu items an LLM business sees (menu_prompt)
INQUIRY_CHARS = 300  # characters of a customer's message quoted in a business prompt


def customer_text(model: "MarketModel", s: Shopper) -> str:
    """The assistant's rules and its customer's request (with its items' values and the required amenities, unless
    the assistant is told the request alone: `customer_view: request`, or inside Magentic's own text: `magentic`)."""
    cu = s.customer
    request = model.edition.request(cu.request)
    if model.config.customer_view == "magentic":
        return tpl.MAGENTIC_CUSTOMER.substitute(name=one_line(cu.name), id=one_line(cu.id), request=request)
    if model.config.customer_view == "request":
        return tpl.CUSTOMER_RULES_REQUEST + "\n" + tpl.CUSTOMER_REQUEST.substitute(request=request)
    items = ", ".join(f"{model.named(i)} (worth ${v:.2f})" for i, v in cu.items.items())
    return tpl.CUSTOMER_RULES + "\n" + tpl.CUSTOMER.substitute(
        request=request, items=items, amenities=", ".join(map(model.named, cu.amenities)) or "none")


def listing(model: "MarketModel", n: int, k: int) -> str:
    """Business k as the n-th listing: its name, description and amenities (none under `offer_amenities: asked`)."""
    seller = model.sellers[k]
    if model.config.offer_amenities == "asked":
        return tpl.LISTING_ASKED.substitute(n=n, name=model.named(seller.business.name),
                                            description=model.edition.description(seller.description))
    has = [model.named(a) for a, v in seller.business.amenities.items() if v]
    return tpl.LISTING.substitute(n=n, name=model.named(seller.business.name),
                                  description=model.edition.description(seller.description), amenities=", ".join(has) or "none")


def found(model: "MarketModel", s: Shopper) -> str:
    """What an assistant writes its inquiry from: its customer, and the businesses its search found."""
    names = ", ".join(model.named(model.sellers[k].business.name) for k in s.results or [])
    return f"{customer_text(model, s)}\nYour search found: {names}."


def proposals(model: "MarketModel", s: Shopper) -> str:
    """What an assistant pays from: its customer, and each proposal received with its business's listing, in order
    of arrival (with the items it lacks, `offer_notes`)."""
    lines = []
    for p in s.proposals:
        items = ", ".join(f"{model.named(i)} at ${v:.2f}" for i, v in p.items.items())
        missing = [model.named(i) for i in s.customer.items if i not in p.items] if model.config.offer_notes else []
        lines.append(listing(model, p.rank, p.business) + reply(model, p) + " " + tpl.PROPOSAL.substitute(
            items=items, total=f"{p.total:.2f}", missing=f" (missing: {', '.join(missing)})" if missing else ""))
    return f"{customer_text(model, s)}\nProposals received, in order of arrival:\n" + "\n".join(lines)


def reply(model: "MarketModel", p: Proposal) -> str:
    """The business's answer to the amenities the customer asked about, as the offer carries it (`offer_amenities:
    asked`); empty when it was asked about none."""
    return tpl.REPLY.substitute(reply=model.quoted(p.note)) if p.note else ""


def inquiries(model: "MarketModel", b: Seller, due: Sequence[Inquiry]) -> str:
    """What a business answers from: its rules, its name and floor, and the round's first inquiries (each with the
    menu total of the items asked for, or, with `menu_prompt` (Magentic's), its menu once and the messages alone)."""
    shown = []
    menu_prompt = model.config.menu_prompt
    for q in due[:MAX_INQUIRIES_SHOWN]:
        text = model.quoted(q.text, INQUIRY_CHARS)
        if menu_prompt:  # Magentic's business reads the message; its menu is in its own text
            shown.append(tpl.INQUIRY_TEXT.substitute(text=text))
            continue
        sold = [i for i in q.customer.customer.items if i in b.business.menu]
        price = sum(b.business.menu[i] for i in sold)
        shown.append(tpl.INQUIRY.substitute(items=", ".join(map(model.named, q.customer.customer.items)),
                                            price=f"{price:.2f}", text=text))
    if menu_prompt:
        listed = list(b.business.menu.items())[:MAX_MENU_SHOWN]
        return tpl.BUSINESS_RULES + "\n" + tpl.BUSINESS_MENU.substitute(
            name=model.named(b.business.name), floor=b.floor_pct, messages="\n".join(shown),
            menu="; ".join(f"{model.named(i)} ${v:.2f}" for i, v in listed))
    return tpl.BUSINESS_RULES + "\n" + tpl.BUSINESS.substitute(
        name=model.named(b.business.name), floor=b.floor_pct, messages="\n".join(shown))
