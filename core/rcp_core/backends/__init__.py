"""Kinds of storage and the engines that copy between them. Modules:

================  ======================================================================
``routing``       which storage an operand names; which engine copies a pair, or why
                  none does
``capabilities``  what each storage keeps, what each engine honours, and the one refusal
                  of what a pair cannot do
``operands``      operand syntax: ``[user@]host[:port]:/path`` and URLs
``port``          the backend port: the storage operations the generic engine needs,
                  one directory at a time (``Port``, ``Entry``, ``Listing``)
``checksums``     the MD5s object stores record of their objects, and whether a
                  file's bytes match one
``features``      the feature table (the README's), derived from the declarations
================  ======================================================================
"""
