"""Local stand-ins for the services Citebot talks to, speaking their real wire formats on loopback.

For tests and benchmarks only; the product never imports them.

* :mod:`eval.fakes.slack_api`: the Slack Web API and signed Events API requests;
* :mod:`eval.fakes.microsoft`: the Bot Connector, Microsoft Graph and a thread running the Teams app;
* :mod:`eval.fakes.openai_api`: an OpenAI-compatible chat completions server.
"""
