"""DFT-domain multikernel RVM for images (Tzikas PhD ch. 4): the ``dft`` backend and the object detector."""
