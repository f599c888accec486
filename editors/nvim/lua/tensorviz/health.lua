-- :checkhealth tensorviz: the server command, the running server, the capture
-- interpreter and the viewer.
local M = {}

local health = vim.health

local function run(argv, cwd)
  local ok, res = pcall(function()
    return vim.system(argv, { cwd = cwd, text = true }):wait(20000)
  end)
  if not ok then return nil, tostring(res) end
  return res
end

-- The capture interpreter as the server picks it without a selection: the `python`
-- setting, else the folder's .venv, else the server's own Python (docs/editors.md).
local function interpreter(settings, root)
  local p = settings.python
  if p and p ~= "" then
    p = vim.fn.expand(p)
    if not p:find("/") then return vim.fn.exepath(p) ~= "" and vim.fn.exepath(p) or p, "the python setting" end
    if p:sub(1, 1) ~= "/" and root then p = root .. "/" .. p end
    return p, "the python setting"
  end
  if root and vim.fn.executable(root .. "/.venv/bin/python") == 1 then
    return root .. "/.venv/bin/python", "the folder's .venv"
  end
  return nil, "the server's own Python"
end

-- The Python the server command runs in: itself, or the shebang of its script.
local function server_python(exe)
  local path = vim.fn.exepath(exe)
  if path == "" then return nil end
  if vim.fs.basename(path):match("^python") then return path end
  local fh = io.open(path, "r")
  local first = fh and fh:read("*l") or ""
  if fh then fh:close() end
  return first:match("^#!%s*(%S*python[%w%.]*)%s*$")
end

local function check_server(tv)
  health.start("tensorviz: server")
  local cmd = tv.config.cmd
  if vim.fn.executable(cmd[1]) ~= 1 then
    health.error(("%s is not executable (cmd = %s)"):format(cmd[1], vim.inspect(cmd)),
      { "pip install 'tensorviz[torch]' (or [jax]) in the Python you run it with", "or set cmd in setup()" })
    return nil
  end
  local argv = vim.deepcopy(cmd)
  if argv[#argv] == "lsp" then argv[#argv] = "--version" else table.insert(argv, "--version") end
  local res, err = run(argv)
  if res and res.code == 0 then
    health.ok(("%s: %s"):format(table.concat(cmd, " "), vim.trim(res.stdout or "")))
  else
    health.error(("%s failed: %s"):format(table.concat(argv, " "), err or vim.trim((res.stderr or "") .. (res.stdout or ""))))
  end
  local clients = vim.lsp.get_clients({ name = "tensorviz" })
  if #clients == 0 then
    health.warn("no tensorviz server is running (open a Python file in a folder with .tensorviz, pyproject.toml or .git)")
    return nil
  end
  for _, c in ipairs(clients) do
    local info = c.server_info or {}
    health.ok(("running (client %d): %s %s in %s"):format(c.id, info.name or "?", info.version or "", c.root_dir or "?"))
  end
  return clients[1]
end

local function check_interpreter(tv, client)
  health.start("tensorviz: capture interpreter")
  local root = client and client.root_dir or vim.fn.getcwd()
  local python, why = interpreter(tv.config.settings or {}, root)
  if not python then
    health.info(("captures run with %s (no python setting, no %s/.venv); :TensorVizOpen asks nothing more"):format(why, root))
    python = server_python(tv.config.cmd[1])
    if not python then return end
  end
  if vim.fn.executable(python) ~= 1 then
    health.error(("%s (from %s) is not executable"):format(python, why),
      { "set settings.python in setup(), or run the command tensorviz.selectInterpreter" })
    return
  end
  local probe = "import importlib.util as u, sys; print(sys.version.split()[0]); "
    .. "print(' '.join(m for m in ('torch', 'jax', 'flax') if u.find_spec(m)))"
  local res, err = run({ python, "-c", probe }, root)
  if not res or res.code ~= 0 then
    health.error(("%s does not run: %s"):format(python, err or vim.trim(res.stderr or "")))
    return
  end
  local lines = vim.split(vim.trim(res.stdout or ""), "\n")
  health.ok(("%s (%s): Python %s"):format(python, why, lines[1] or "?"))
  if (lines[2] or "") == "" then
    health.warn("it has neither torch nor jax: captures will fail at their dependencies",
      { "install the capture extra into it: pip install 'tensorviz[torch]' or 'tensorviz[jax]'" })
  else
    health.ok("frameworks: " .. lines[2])
  end
end

local function check_viewer(tv)
  health.start("tensorviz: viewer")
  local opens = tv.browser_opens or { tried = 0, failed = 0 }
  if not vim.ui.open then
    health.warn("this Neovim has no vim.ui.open: the server shows the graph's URL in a message instead")
  elseif opens.tried > 0 and opens.failed == opens.tried then
    health.error(("every browser open failed this session (%d of %d): %s"):format(opens.failed, opens.tried,
      opens.last_error or "no browser opened"),
      { "set $BROWSER, or vim.ui.open's opener (xdg-open, open, wslview)", "open the URL from :LspLog yourself, or :TensorVizShow to try again" })
  elseif opens.failed > 0 then
    health.warn(("%d of %d browser opens failed this session: %s"):format(opens.failed, opens.tried,
      opens.last_error or "no browser opened"))
  elseif opens.tried > 0 then
    health.ok(("graphs open with vim.ui.open (your browser): %d opened this session"):format(opens.tried))
  else
    health.ok("graphs open with vim.ui.open (your browser); the URL is also in :LspLog")
  end
  local url = tv.last_viewer_url
  if not url then
    health.info("no graph opened yet in this session (:TensorVizOpen)")
    return
  end
  local host, port = url:match("^https?://([%d%.]+):(%d+)/")
  if not host then
    health.warn("the last viewer URL is not a local address: " .. url)
    return
  end
  local tcp = vim.uv.new_tcp()
  local state
  tcp:connect(host, tonumber(port), function(err) state = err and ("refused: " .. err) or "ok" end)
  vim.wait(2000, function() return state ~= nil end, 20)
  tcp:close()
  local shown = url:gsub("/[%w_-]+/%?", "/<token>/?")
  if state == "ok" then
    health.ok("the viewer answers at " .. shown)
  else
    health.error(("the viewer at %s does not answer (%s): it runs only while the server runs"):format(shown, state or "timed out"))
  end
end

function M.check()
  local tv = require("tensorviz")
  local client = check_server(tv)
  check_interpreter(tv, client)
  check_viewer(tv)
end

return M
