"""Who is asking: principals and, as they arrive, authentication and authorization.

  principal.py   KafkaPrincipal ("User:alice"), and ANONYMOUS, the principal of an unauthenticated connection
"""
