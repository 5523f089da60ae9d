"""jaxprc.runtime: PJRT clients, devices, device arrays, executables."""
