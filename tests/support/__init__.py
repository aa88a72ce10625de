"""What the test modules share and that is no fixture: the fake runner and the core driver,
the reference KV cache, the app's drivers, stand-in servers, and small helpers. Imported as
`tests.support.<module>`; pytest collects nothing from here."""
