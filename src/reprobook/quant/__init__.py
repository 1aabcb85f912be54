"""Post-training quantisation: fake quantisers, a functional BERT forward with quantisation points,
and the layer-wise / block-wise clipping searches of Q-VLM-style PTQ."""
