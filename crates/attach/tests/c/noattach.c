/* A shared library without Agent_OnAttach. */
int not_an_agent(void) { return 1; }
