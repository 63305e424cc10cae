"""Each chapter's claim rows and the words its text glues, assembled from the chapter's tables.

A chapter measures with the library and judges with :mod:`tokendyn.publish.verdicts`; the module
named after it here only puts those numbers into its claims table and its sentences, so that the
notebook stays data -> library call -> table or figure.
"""
