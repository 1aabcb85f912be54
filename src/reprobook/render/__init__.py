"""Differentiable renderers small enough for a CPU, with known ground truth: orthographic Gaussian
splatting, a voxel radiance field with ray marching, pinhole and equirectangular ray casting, and a
soft sprite rasteriser. Each module renders one kind of scene and says in its docstring what it
integrates and how its gradients flow."""
