//! VK_LAYER_echo: the exported entry points of the layer (to be written by the foundation).

mod profile;
