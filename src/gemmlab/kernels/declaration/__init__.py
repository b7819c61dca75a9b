"""What a user's kernel declaration is read with, whichever file holds it
(a TOML file beside a ``.cu``: kernels/user.py; a Python file's ``GEMMLAB``
dict: kernels/callables.py): its small expressions (expressions.py), the
keys, parameters and spec every declaration has (base.py), and what a
``.cu`` file says of its kernel (source.py)."""
