"""Result documents: writing them atomically, their schema, the environment recorded with them, the
C++ driver's results read into rows, and the merges of several processes' documents into one."""
