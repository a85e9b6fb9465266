"""The deepspeed backend's worker: one HF Transformers + Accelerate + DeepSpeed (ALST) training
step of a ulysses scenario, traced phase by phase (docs/DEEPSPEED_BACKEND.md).

GPU-free modules (imported by the CI tests without torch): job, hfconfig, dsconfig.
GPU modules (torch, transformers, accelerate, deepspeed): phases, offload, features, step.
"""
