"""Public: the action spaces a scenario declares (`sim.core.spaces`), where scenario files import them from."""

from sim.core.spaces import Choice, Form, Number, Space, SpaceError, Text, space_key

__all__ = ["Choice", "Number", "Text", "Form", "Space", "SpaceError", "space_key"]
