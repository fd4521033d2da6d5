"""`kafka-dr demo`: the DR drill (drill.py) with an application in the loop (app.py)."""
