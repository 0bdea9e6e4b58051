"""Learning kernels and the model built on them: matrix products, the SSM encoder, heads, losses, AdamW.

Kernel modules (each declares its kernels and registers their numpy references):
`matmul` (GEMMs, bias gradient, activations), `ssm` (the encoder's scan), `heads` (C51 and
policy distributions), `losses`, `optim`. `functional` holds the dtype-generic math both the
references and the finite-difference gradient checks use; `model` lays out the parameters and
builds the launch plans of a forward and backward pass.
"""
