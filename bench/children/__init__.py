"""Runs in several processes: --processes and --ab (processes), --gpus and --shards (shard), and the
harness side that starts them and merges what they wrote (several)."""
