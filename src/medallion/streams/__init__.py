"""Stream wiring: sources, sinks, triggers and checkpoints. No business rules live here."""
