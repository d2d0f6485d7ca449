"""Example scenarios for the conformance kit, as PettingZoo ships example environments beside its API tests:
`coins.Coins` keeps every rule (`societas check scenarios.examples.coins:Coins`), `broken.BrokenCoins` breaks
four (`societas check scenarios.examples.broken:BrokenCoins`). Neither is registered: they are run by reference,
as a scenario file of your own is."""
