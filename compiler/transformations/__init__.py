"""The transformations' front ends: grad/vjp/jvp/linearize (ad), vmap, pmap, custom derivative
rules (custom_derivatives), custom batching rules (custom_batching) and remat (ad_checkpoint), over the tracing they share
(nested_tracing). Each turns a Python function into a traced program, runs the IR passes on it and binds the result.
"""
