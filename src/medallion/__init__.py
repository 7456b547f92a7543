"""medallion: a streaming lakehouse on Delta Lake."""
