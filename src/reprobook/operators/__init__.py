"""Neural operators for functions on a 2-D grid: spectral resampling and CNO-style alias-free
blocks (:mod:`.cno`), the Fourier neural operator (:mod:`.fno`), MambaNO's 2-D selective scan and
the U-Net operators built from these blocks (:mod:`.mambano`), and their training, evaluation
across resolutions and timing (:mod:`.train`)."""
