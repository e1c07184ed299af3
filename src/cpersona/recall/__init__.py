"""The recall task graph: plan, fan-out, cue loop, stage chain, render."""
